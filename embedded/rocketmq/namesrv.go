package rocketmq

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Request and response codes (org.apache.rocketmq.common.protocol.RequestCode
// and ResponseCode).
const (
	reqSendMessage              = 10
	reqPullMessage              = 11
	reqQueryConsumerOffset      = 14
	reqUpdateConsumerOffset     = 15
	reqUpdateAndCreateTopic     = 17
	reqSearchOffsetByTimestamp  = 29
	reqGetMaxOffset             = 30
	reqGetMinOffset             = 31
	reqGetEarliestMsgStoretime  = 32
	reqViewMessageByID          = 33
	reqHeartBeat                = 34
	reqUnregisterClient         = 35
	reqConsumerSendMsgBack      = 36
	reqEndTransaction           = 37
	reqGetConsumerListByGroup   = 38
	reqNotifyConsumerIdsChanged = 40
	reqLockBatchMQ              = 41
	reqUnlockBatchMQ            = 42
	reqGetRouteInfoByTopic      = 105
	reqGetBrokerClusterInfo     = 106
	reqGetAllTopicListFromNS    = 206
	reqSendMessageV2            = 310
	reqSendBatchMessage         = 320

	resSuccess              = 0
	resSystemError          = 1
	resRequestCodeNotSupp   = 3
	resMessageIllegal       = 13
	resTopicNotExist        = 17
	resPullNotFound         = 19
	resPullRetryImmediately = 20
	resPullOffsetMoved      = 21
	resQueryNotFound        = 22
	resSubscriptionNotSupp  = 26

	permReadWrite = 6
)

const (
	retryPrefix = "%RETRY%"
	dlqPrefix   = "%DLQ%"
)

func (b *Broker) nameServerHandler(c *conn, req *command) *command {
	switch req.Code {
	case reqGetRouteInfoByTopic:
		return b.handleRoute(req)
	case reqGetBrokerClusterInfo:
		return b.handleClusterInfo()
	case reqGetAllTopicListFromNS:
		body, _ := json.Marshal(map[string]any{"topicList": b.store.topicNames()})
		return okResp(nil, body)
	default:
		return errResp(resRequestCodeNotSupp, fmt.Sprintf("request code %d is not supported by the embedded name server", req.Code))
	}
}

// autoQueues is the queue count a topic gets when first referenced.
func (b *Broker) autoQueues(topic string) int {
	if strings.HasPrefix(topic, retryPrefix) || strings.HasPrefix(topic, dlqPrefix) {
		return 1
	}
	return b.opts.DefaultQueues
}

// handleRoute answers every valid topic, creating it on first lookup: the
// embedded broker behaves as if autoCreateTopicEnable were on for producers
// and consumers alike.
func (b *Broker) handleRoute(req *command) *command {
	topic := req.ext("topic")
	td, err := b.store.ensureTopic(topic, b.autoQueues(topic))
	if err != nil {
		return errResp(resTopicNotExist, fmt.Sprintf("No topic route info in name server for the topic: %s (%v)", topic, err))
	}
	n := td.queueCount()
	route := map[string]any{
		"queueDatas": []map[string]any{{
			"brokerName":     brokerName,
			"readQueueNums":  n,
			"writeQueueNums": n,
			"perm":           permReadWrite,
			"topicSysFlag":   0,
		}},
		"brokerDatas": []map[string]any{{
			"cluster":     clusterName,
			"brokerName":  brokerName,
			"brokerAddrs": map[string]string{"0": b.BrokerAddr()},
		}},
		"filterServerTable": map[string]any{},
	}
	body, err := json.Marshal(route)
	if err != nil {
		return errResp(resSystemError, err.Error())
	}
	return okResp(nil, body)
}

func (b *Broker) handleClusterInfo() *command {
	info := map[string]any{
		"brokerAddrTable": map[string]any{
			brokerName: map[string]any{
				"cluster":     clusterName,
				"brokerName":  brokerName,
				"brokerAddrs": map[string]string{"0": b.BrokerAddr()},
			},
		},
		"clusterAddrTable": map[string][]string{clusterName: {brokerName}},
	}
	body, err := json.Marshal(info)
	if err != nil {
		return errResp(resSystemError, err.Error())
	}
	return okResp(nil, body)
}
