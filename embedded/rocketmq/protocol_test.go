package rocketmq

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// rawClient speaks the remoting protocol directly, to test what the real
// client never sends.
type rawClient struct {
	t       testing.TB
	c       *conn
	mu      sync.Mutex
	pending map[int32]chan *command
	seq     int32
	done    chan struct{}
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rc := &rawClient{t: t, c: newConn(nc), pending: make(map[int32]chan *command), done: make(chan struct{})}
	go func() {
		defer close(rc.done)
		r := bufio.NewReader(nc)
		for {
			cmd, err := readCommand(r)
			if err != nil {
				return
			}
			rc.mu.Lock()
			ch := rc.pending[cmd.Opaque]
			delete(rc.pending, cmd.Opaque)
			rc.mu.Unlock()
			if ch != nil {
				ch <- cmd
			}
		}
	}()
	t.Cleanup(func() {
		rc.c.close()
		<-rc.done
	})
	return rc
}

func (rc *rawClient) start(code int, ext map[string]string, body []byte, st byte) <-chan *command {
	rc.t.Helper()
	rc.mu.Lock()
	rc.seq++
	op := rc.seq
	ch := make(chan *command, 1)
	rc.pending[op] = ch
	rc.mu.Unlock()
	req := &command{Code: code, Opaque: op, ExtFields: ext, Body: body, Version: protocolVersion}
	if err := rc.c.write(req, st); err != nil {
		rc.t.Fatal(err)
	}
	return ch
}

func (rc *rawClient) call(code int, ext map[string]string, body []byte) *command {
	rc.t.Helper()
	return rc.wait(rc.start(code, ext, body, serializeJSON), 10*time.Second)
}

func (rc *rawClient) wait(ch <-chan *command, timeout time.Duration) *command {
	rc.t.Helper()
	select {
	case resp := <-ch:
		if resp.Flag&flagResponse == 0 {
			rc.t.Fatalf("answer without the response flag: %+v", resp)
		}
		return resp
	case <-time.After(timeout):
		rc.t.Fatalf("no answer within %v", timeout)
		return nil
	}
}

// waitClosed asserts the broker closed the connection.
func (rc *rawClient) waitClosed() {
	rc.t.Helper()
	select {
	case <-rc.done:
	case <-time.After(5 * time.Second):
		rc.t.Fatal("broker did not close the connection")
	}
}

func rawSend(t testing.TB, rc *rawClient, topic string, queue int, body string, props map[string]string) *command {
	t.Helper()
	resp := rc.call(reqSendMessage, map[string]string{
		"producerGroup": "raw", "topic": topic, "queueId": strconv.Itoa(queue), "sysFlag": "0",
		"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": marshalProps(props), "reconsumeTimes": "0",
	}, []byte(body))
	if resp.Code != resSuccess {
		t.Fatalf("send: code %d %s", resp.Code, resp.Remark)
	}
	return resp
}

func pullExt(topic string, queue int, offset int64, suspendMs int) map[string]string {
	return map[string]string{
		"consumerGroup": "raw-group", "topic": topic, "queueId": strconv.Itoa(queue),
		"queueOffset": strconv.FormatInt(offset, 10), "maxMsgNums": "32", "sysFlag": "2",
		"commitOffset": "0", "suspendTimeoutMillis": strconv.Itoa(suspendMs),
		"subscription": "*", "expressionType": "TAG",
	}
}

func TestMalformedFramesCloseOnlyThatConnection(t *testing.T) {
	b := startBroker(t, Options{})
	frames := map[string][]byte{
		"huge length":            {0xFF, 0xFF, 0xFF, 0xFF},
		"length below minimum":   {0, 0, 0, 3, 1, 2, 3},
		"header longer than all": {0, 0, 0, 8, 0, 0, 0, 50, '{', '}', 0, 0},
		"bad json":               append([]byte{0, 0, 0, 9, 0, 0, 0, 5}, "{code"...),
		"unknown serializer":     {0, 0, 0, 6, 7, 0, 0, 2, '{', '}'},
		"short binary header":    {0, 0, 0, 8, 1, 0, 0, 4, 0, 1, 0, 0},
		"binary bogus ext":       append([]byte{0, 0, 0, 29, 1, 0, 0, 25}, binaryHeaderWithBadExt()...),
	}
	for name, frame := range frames {
		for _, addr := range []string{b.BrokerAddr(), b.NameServerAddr()} {
			rc := dialRaw(t, addr)
			if _, err := rc.c.nc.Write(frame); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			rc.waitClosed()
		}
	}
	// Random garbage with plausible lengths never takes the broker down.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		rc := dialRaw(t, b.BrokerAddr())
		n := rng.IntN(64) + 4
		frame := make([]byte, 4+n)
		binary.BigEndian.PutUint32(frame, uint32(n))
		for j := 4; j < len(frame); j++ {
			frame[j] = byte(rng.Uint32())
		}
		frame[4] = byte(rng.IntN(2)) // JSON or binary
		_, _ = rc.c.nc.Write(frame)
		rc.c.close()
		<-rc.done
	}
	// A truncated frame followed by a close is just a dropped connection.
	rc := dialRaw(t, b.BrokerAddr())
	_, _ = rc.c.nc.Write([]byte{0, 0, 1, 0, 0, 0})
	rc.c.close()

	good := dialRaw(t, b.BrokerAddr())
	if resp := good.call(999, nil, nil); resp.Code != resRequestCodeNotSupp {
		t.Fatalf("unknown code answered with %d", resp.Code)
	}
	if resp := good.call(reqPullMessage, map[string]string{"topic": "x", "queueId": "oops"}, nil); resp.Code != resSystemError {
		t.Fatalf("bad pull header answered with %d", resp.Code)
	}
	if resp := good.call(reqSendBatchMessage, map[string]string{"b": "batchy", "e": "0"}, []byte{0, 0, 0, 99, 1}); resp.Code != resMessageIllegal {
		t.Fatalf("bad batch answered with %d %s", resp.Code, resp.Remark)
	}
	if resp := good.call(reqHeartBeat, nil, []byte("not json")); resp.Code != resSystemError {
		t.Fatalf("bad heartbeat answered with %d", resp.Code)
	}
	ns := dialRaw(t, b.NameServerAddr())
	if resp := ns.call(999, nil, nil); resp.Code != resRequestCodeNotSupp {
		t.Fatalf("name server answered unknown code with %d", resp.Code)
	}
}

func binaryHeaderWithBadExt() []byte {
	h := make([]byte, 0, 25)
	h = binary.BigEndian.AppendUint16(h, 34)
	h = append(h, 9)
	h = binary.BigEndian.AppendUint16(h, 1)
	h = binary.BigEndian.AppendUint32(h, 1)
	h = binary.BigEndian.AppendUint32(h, 0)
	h = binary.BigEndian.AppendUint32(h, 0) // remark
	h = binary.BigEndian.AppendUint32(h, 4) // ext length
	h = append(h, 0x7F, 0xFF, 0, 0)         // key length beyond the ext block
	return h
}

func TestNameServerRoutes(t *testing.T) {
	b := startBroker(t, Options{DefaultQueues: 3, AccessKey: "ak", SecretKey: "sk"})
	ns := dialRaw(t, b.NameServerAddr())

	// Route lookups need no signature even with ACL on.
	resp := ns.call(reqGetRouteInfoByTopic, map[string]string{"topic": "fresh"}, nil)
	if resp.Code != resSuccess {
		t.Fatalf("route: %d %s", resp.Code, resp.Remark)
	}
	var route struct {
		QueueDatas []struct {
			BrokerName                    string
			ReadQueueNums, WriteQueueNums int
			Perm                          int
		}
		BrokerDatas []struct {
			Cluster, BrokerName string
			BrokerAddrs         map[string]string
		}
	}
	if err := json.Unmarshal(resp.Body, &route); err != nil {
		t.Fatal(err)
	}
	if len(route.QueueDatas) != 1 || route.QueueDatas[0].ReadQueueNums != 3 || route.QueueDatas[0].Perm != 6 ||
		len(route.BrokerDatas) != 1 || route.BrokerDatas[0].BrokerAddrs["0"] != b.BrokerAddr() {
		t.Fatalf("unexpected route %s", resp.Body)
	}
	resp = ns.call(reqGetRouteInfoByTopic, map[string]string{"topic": "%RETRY%workers"}, nil)
	if resp.Code != resSuccess || !json.Valid(resp.Body) || b.store.topic("%RETRY%workers").queueCount() != 1 {
		t.Fatalf("retry topic route: %d %s", resp.Code, resp.Body)
	}
	if resp = ns.call(reqGetRouteInfoByTopic, map[string]string{"topic": "bad topic!"}, nil); resp.Code != resTopicNotExist {
		t.Fatalf("invalid topic answered with %d", resp.Code)
	}
	resp = ns.call(reqGetBrokerClusterInfo, nil, nil)
	if resp.Code != resSuccess || !json.Valid(resp.Body) {
		t.Fatalf("cluster info: %d %s", resp.Code, resp.Body)
	}

	// The ROCKETMQ binary serialization is answered in kind.
	ch := ns.start(reqGetRouteInfoByTopic, map[string]string{"topic": "fresh"}, nil, serializeRocketMQ)
	if resp := ns.wait(ch, 5*time.Second); resp.serializeType != serializeRocketMQ || resp.Code != resSuccess {
		t.Fatalf("binary request answered with type %d code %d", resp.serializeType, resp.Code)
	}

	// The broker itself rejects unsigned requests.
	br := dialRaw(t, b.BrokerAddr())
	if resp := br.call(reqGetMaxOffset, map[string]string{"topic": "fresh", "queueId": "0"}, nil); resp.Code != resSystemError {
		t.Fatalf("unsigned broker request answered with %d", resp.Code)
	}
}

func TestLongPollingAndPullStatus(t *testing.T) {
	b := startBroker(t, Options{DefaultQueues: 2})
	if err := b.CreateTopic("lp", 2); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, b.BrokerAddr())

	// An empty queue answers PULL_NOT_FOUND once the suspend time is over.
	start := time.Now()
	resp := rc.call(reqPullMessage, pullExt("lp", 0, 0, 300), nil)
	if el := time.Since(start); resp.Code != resPullNotFound || el < 250*time.Millisecond {
		t.Fatalf("empty pull: code %d after %v", resp.Code, el)
	}

	// A suspended pull returns as soon as a message arrives, and does not
	// hold up other requests on the same connection.
	start = time.Now()
	pending := rc.start(reqPullMessage, pullExt("lp", 0, 0, 20000), nil, serializeJSON)
	hb, _ := json.Marshal(map[string]any{"clientID": "raw@1", "consumerDataSet": []any{}})
	if resp := rc.call(reqHeartBeat, nil, hb); resp.Code != resSuccess || time.Since(start) > 2*time.Second {
		t.Fatalf("heartbeat behind a suspended pull: code %d after %v", resp.Code, time.Since(start))
	}
	sent := rawSend(t, dialRaw(t, b.BrokerAddr()), "lp", 0, "hello", map[string]string{"TAGS": "t1", "KEYS": "k1", "UNIQ_KEY": "U1"})
	resp = rc.wait(pending, 5*time.Second)
	if el := time.Since(start); resp.Code != resSuccess || el > 3*time.Second {
		t.Fatalf("suspended pull: code %d after %v", resp.Code, el)
	}
	msgs := primitive.DecodeMessage(resp.Body)
	if len(msgs) != 1 {
		t.Fatalf("decoded %d messages", len(msgs))
	}
	m := msgs[0]
	if string(m.Body) != "hello" || m.Topic != "lp" || m.QueueOffset != 0 || m.GetTags() != "t1" || m.GetKeys() != "k1" ||
		m.MsgId != "U1" || m.OffsetMsgId != sent.ExtFields["msgId"] || m.StoreHost != b.BrokerAddr() {
		t.Fatalf("decoded message: %s", m)
	}
	if resp.ExtFields["nextBeginOffset"] != "1" || resp.ExtFields["maxOffset"] != "1" || resp.ExtFields["minOffset"] != "0" {
		t.Fatalf("pull header: %v", resp.ExtFields)
	}

	// Offsets past the end are corrected; the other statuses follow the Java store.
	if resp := rc.call(reqPullMessage, pullExt("lp", 0, 5, 0), nil); resp.Code != resPullOffsetMoved || resp.ExtFields["nextBeginOffset"] != "0" {
		t.Fatalf("pull past the end: %d %v", resp.Code, resp.ExtFields)
	}
	if resp := rc.call(reqPullMessage, pullExt("lp", 1, 3, 0), nil); resp.Code != resPullOffsetMoved {
		t.Fatalf("pull from an empty queue at 3: %d", resp.Code)
	}
	if resp := rc.call(reqPullMessage, pullExt("nope", 0, 0, 0), nil); resp.Code != resTopicNotExist {
		t.Fatalf("pull from unknown topic: %d", resp.Code)
	}
	if resp := rc.call(reqPullMessage, pullExt("lp", 9, 0, 0), nil); resp.Code != resSystemError {
		t.Fatalf("pull from unknown queue: %d", resp.Code)
	}

	// A batch lands in one queue with consecutive offsets.
	var body []byte
	for i := 0; i < 3; i++ {
		m := primitive.NewMessage("lp", []byte("b"+strconv.Itoa(i)))
		m.WithTag("bt")
		body = append(body, m.Marshal()...)
	}
	resp = rc.call(reqSendBatchMessage, map[string]string{"a": "raw", "b": "lp", "e": "1", "f": "0", "g": "0", "h": "0", "i": "", "j": "0", "m": "true"}, body)
	if resp.Code != resSuccess || resp.ExtFields["queueOffset"] != "0" || len(strings.Split(resp.ExtFields["msgId"], ",")) != 3 {
		t.Fatalf("batch send: %d %v", resp.Code, resp.ExtFields)
	}
	ext := pullExt("lp", 1, 0, 0)
	ext["maxMsgNums"] = "2"
	resp = rc.call(reqPullMessage, ext, nil)
	msgs = primitive.DecodeMessage(resp.Body)
	if resp.Code != resSuccess || len(msgs) != 2 || string(msgs[1].Body) != "b1" || msgs[1].QueueOffset != 1 || resp.ExtFields["nextBeginOffset"] != "2" {
		t.Fatalf("pull with maxMsgNums 2: %d, %d messages, %v", resp.Code, len(msgs), resp.ExtFields)
	}

	// Server-side tag filtering honours maxMsgNums and skips non-matching messages.
	ext = pullExt("lp", 1, 0, 0)
	ext["sysFlag"], ext["subscription"], ext["maxMsgNums"] = "6", "bt || other", "2"
	resp = rc.call(reqPullMessage, ext, nil)
	if msgs := primitive.DecodeMessage(resp.Body); resp.Code != resSuccess || len(msgs) != 2 || resp.ExtFields["nextBeginOffset"] != "2" {
		t.Fatalf("filtered pull: %d, %d messages, %v", resp.Code, len(msgs), resp.ExtFields)
	}
	ext["subscription"] = "none"
	if resp = rc.call(reqPullMessage, ext, nil); resp.Code != resPullRetryImmediately || resp.ExtFields["nextBeginOffset"] != "3" {
		t.Fatalf("pull matching nothing: %d %v", resp.Code, resp.ExtFields)
	}
	ext["expressionType"] = "SQL92"
	if resp = rc.call(reqPullMessage, ext, nil); resp.Code != resSubscriptionNotSupp {
		t.Fatalf("SQL92 pull: %d", resp.Code)
	}

	// Offsets: query before commit, update, query, search by time.
	q := map[string]string{"consumerGroup": "g", "topic": "lp", "queueId": "1"}
	if resp := rc.call(reqQueryConsumerOffset, q, nil); resp.Code != resQueryNotFound {
		t.Fatalf("query unknown offset: %d", resp.Code)
	}
	u := map[string]string{"consumerGroup": "g", "topic": "lp", "queueId": "1", "commitOffset": "2"}
	rc.call(reqUpdateConsumerOffset, u, nil)
	if resp := rc.call(reqQueryConsumerOffset, q, nil); resp.Code != resSuccess || resp.ExtFields["offset"] != "2" {
		t.Fatalf("query offset: %d %v", resp.Code, resp.ExtFields)
	}
	s := map[string]string{"topic": "lp", "queueId": "1", "timestamp": strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)}
	if resp := rc.call(reqSearchOffsetByTimestamp, s, nil); resp.ExtFields["offset"] != "3" {
		t.Fatalf("search future timestamp: %v", resp.ExtFields)
	}
	s["timestamp"] = "0"
	if resp := rc.call(reqSearchOffsetByTimestamp, s, nil); resp.ExtFields["offset"] != "0" {
		t.Fatalf("search zero timestamp: %v", resp.ExtFields)
	}
	if resp := rc.call(reqGetMaxOffset, map[string]string{"topic": "lp", "queueId": "1"}, nil); resp.ExtFields["offset"] != "3" {
		t.Fatalf("max offset: %v", resp.ExtFields)
	}
}

// A pull suspended on a connection that goes away is released, and Close
// returns while pulls are parked.
func TestCloseWithParkedPulls(t *testing.T) {
	b, err := Start(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic("idle", 1); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, b.BrokerAddr())
	rc.start(reqPullMessage, pullExt("idle", 0, 0, 60000), nil, serializeJSON)
	gone := dialRaw(t, b.BrokerAddr())
	gone.start(reqPullMessage, pullExt("idle", 0, 0, 60000), nil, serializeJSON)
	waitFor(t, 5*time.Second, "pulls parked", func() bool { return b.parks.parkedQueues("raw-group") == 1 })
	gone.c.close()
	done := make(chan error)
	go func() { done <- b.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked by a parked pull")
	}
	rc.waitClosed()
}

func FuzzDecode(f *testing.F) {
	m := primitive.NewMessage("t", []byte("body"))
	m.WithTag("x")
	f.Add(append([]byte{0, 0, 0, 2}, "{}"...))
	f.Add(append([]byte{1, 0, 0, 25}, binaryHeaderWithBadExt()...))
	f.Add(m.Marshal())
	rec := appendRecord(nil, &message{topic: "t", body: []byte("b"), props: "A\x01B\x02"}, [8]byte{})
	f.Add(rec)
	f.Fuzz(func(t *testing.T, data []byte) {
		if cmd, err := decodeFrame(data); err == nil {
			if _, err := encodeHeader(cmd, cmd.serializeType); err != nil {
				t.Fatal(err)
			}
		}
		if entries, err := decodeBatch(data); err == nil {
			for _, e := range entries {
				_ = parseProps(e.props)
			}
		}
		if r, err := parseRecord(data); err == nil {
			_ = r.toMessage()
			_, _ = propValue(r.props(), propTags)
		}
	})
}

// The hand-written header codec must agree with encoding/json whenever it
// accepts an input, and what it writes must read back the same.
func FuzzJSONHeader(f *testing.F) {
	f.Add([]byte(`{"code":10,"language":"GO","version":317,"opaque":5,"flag":0,"remark":"","extFields":{"topic":"t","queueId":"1"}}`))
	f.Add([]byte(`{"code":-1,"extFields":{},"extFields":{"a":"\u00e9\n\"x"},"remark":"r\\/"}`))
	f.Add([]byte(` { "opaque" : 2147483647 , "flag":1 } `))
	f.Add([]byte(`{"code":1e2}`))
	f.Add([]byte(`{"remark":"\ud800"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := fastDecodeHeader(data)
		if ok {
			var h jsonHeader
			if err := json.Unmarshal(data, &h); err != nil {
				t.Fatalf("fast path accepted what encoding/json rejects (%v): %q", err, data)
			}
			var lang string
			if len(h.Language) > 0 {
				_ = json.Unmarshal(h.Language, &lang)
			}
			slow := &command{Code: h.Code, Version: h.Version, Opaque: h.Opaque, Flag: h.Flag,
				Remark: h.Remark, ExtFields: h.ExtFields, Language: lang}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("fast %+v != encoding/json %+v for %q", fast, slow, data)
			}
		}
		// Whatever the content, an encoded header decodes to the same values.
		in := &command{Code: len(data), Opaque: int32(len(data)), Remark: string(data),
			ExtFields: map[string]string{string(data): string(data), "k": "v"}}
		var h jsonHeader
		if err := json.Unmarshal(appendJSONHeader(nil, in), &h); err != nil {
			t.Fatalf("encoded header is not JSON: %v", err)
		}
		if utf8.Valid(data) && (h.Remark != in.Remark || h.ExtFields[string(data)] != string(data) || h.Code != in.Code) {
			t.Fatalf("round trip changed %q", data)
		}
	})
}
