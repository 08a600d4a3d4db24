package rocketmq

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The remoting client below speaks just enough of the RocketMQ protocol for
// what the client library does not offer or does not check: cluster and route
// lookups, topic creation with the broker's answer, queue and group offsets.

// Request and response codes (RequestCode / ResponseCode of RocketMQ).
const (
	codeQueryConsumerOffset = 14
	codeUpdateCreateTopic   = 17
	codeGetMaxOffset        = 30
	codeGetMinOffset        = 31
	codeGetConsumerList     = 38
	codeGetRouteInfo        = 105
	codeGetClusterInfo      = 106

	resSuccess       = 0
	resTopicNotExist = 17
	resQueryNotFound = 22

	flagResponse = 1

	// remotingVersion is what the Go client sends (RocketMQ 4.x, V4_9_x).
	remotingVersion = 317
	maxFrame        = 64 << 20
	// requestTimeout bounds a request whose context has no earlier deadline.
	requestTimeout = 15 * time.Second
	// idlePerAddr is how many connections stay open per address between
	// requests; lag polling needs one, a concurrent topic creation a second.
	idlePerAddr = 2

	// probeTopic is asked for its max offset to check credentials: the Java
	// broker's default topic, present wherever topics are auto-created.
	probeTopic = "TBW102"
)

var errClosed = errors.New("rocketmq: target is closed")

// command is one remoting frame with a JSON header.
type command struct {
	Code      int               `json:"code"`
	Language  string            `json:"language"`
	Version   int               `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields,omitempty"`
	Body      []byte            `json:"-"`
}

// brokerError is a well-formed refusal from a name server or broker.
type brokerError struct {
	addr   string
	code   int
	remark string
}

func (e *brokerError) Error() string {
	if e.remark == "" {
		return fmt.Sprintf("%s answered code %d", e.addr, e.code)
	}
	return fmt.Sprintf("%s answered code %d: %s", e.addr, e.code, e.remark)
}

type rconn struct {
	nc net.Conn
	r  *bufio.Reader
}

// remoting keeps a few idle connections per address and signs requests when
// credentials are set.
type remoting struct {
	accessKey, secretKey string
	nameServers          []string

	opaque atomic.Int32
	mu     sync.Mutex
	idle   map[string][]*rconn
	closed bool
}

func newRemoting(nameServers []string, accessKey, secretKey string) *remoting {
	return &remoting{nameServers: nameServers, accessKey: accessKey, secretKey: secretKey, idle: map[string][]*rconn{}}
}

func (r *remoting) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, conns := range r.idle {
		for _, c := range conns {
			_ = c.nc.Close()
		}
	}
	r.idle = nil
}

func (r *remoting) get(ctx context.Context, addr string) (*rconn, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errClosed
	}
	if conns := r.idle[addr]; len(conns) > 0 {
		c := conns[len(conns)-1]
		r.idle[addr] = conns[:len(conns)-1]
		r.mu.Unlock()
		return c, nil
	}
	r.mu.Unlock()
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	nc, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rconn{nc: nc, r: bufio.NewReaderSize(nc, 16<<10)}, nil
}

func (r *remoting) put(addr string, c *rconn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || len(r.idle[addr]) >= idlePerAddr {
		_ = c.nc.Close()
		return
	}
	r.idle[addr] = append(r.idle[addr], c)
}

// sign adds AccessKey and Signature the way the Java ACL validator checks
// them: HMAC-SHA1 with the secret key over the values of all ext fields
// sorted by key, then the body, in base64.
func (r *remoting) sign(cmd *command) {
	if r.accessKey == "" {
		return
	}
	cmd.ExtFields["AccessKey"] = r.accessKey
	keys := make([]string, 0, len(cmd.ExtFields))
	for k := range cmd.ExtFields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(r.secretKey))
	for _, k := range keys {
		mac.Write([]byte(cmd.ExtFields[k]))
	}
	mac.Write(cmd.Body)
	cmd.ExtFields["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// invoke sends one request and waits for its answer, bounded by ctx.
func (r *remoting) invoke(ctx context.Context, addr string, code int, ext map[string]string, body []byte) (*command, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ext == nil {
		ext = map[string]string{}
	}
	req := &command{Code: code, Language: "GO", Version: remotingVersion, Opaque: r.opaque.Add(1), ExtFields: ext, Body: body}
	r.sign(req)
	c, err := r.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(requestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.nc.SetDeadline(deadline)
	// A cancelled ctx interrupts the blocked read or write at once.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	resp, err := exchange(c, req)
	if !stop() || err != nil {
		_ = c.nc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	_ = c.nc.SetDeadline(time.Time{})
	r.put(addr, c)
	return resp, nil
}

func exchange(c *rconn, req *command) (*command, error) {
	hdr, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	frame := make([]byte, 8, 8+len(hdr)+len(req.Body))
	binary.BigEndian.PutUint32(frame[0:], uint32(4+len(hdr)+len(req.Body)))
	binary.BigEndian.PutUint32(frame[4:], uint32(len(hdr))) // serialize type 0: JSON
	frame = append(append(frame, hdr...), req.Body...)
	if _, err := c.nc.Write(frame); err != nil {
		return nil, err
	}
	for {
		resp, err := readCommand(c.r)
		if err != nil {
			return nil, err
		}
		// Anything else is a request from the server, which this
		// connection never subscribed to; skip it.
		if resp.Flag&flagResponse != 0 && resp.Opaque == req.Opaque {
			return resp, nil
		}
	}
}

func readCommand(r *bufio.Reader) (*command, error) {
	var lb [8]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, err
	}
	total := binary.BigEndian.Uint32(lb[0:])
	mark := binary.BigEndian.Uint32(lb[4:])
	hlen := mark & 0xFFFFFF
	if total < 4 || total > maxFrame || hlen > total-4 {
		return nil, fmt.Errorf("malformed remoting frame (length %d, header %d)", total, hlen)
	}
	if st := mark >> 24; st != 0 {
		return nil, fmt.Errorf("answer in serialize type %d; only JSON (0) is understood", st)
	}
	buf := make([]byte, total-4)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	var cmd command
	if err := json.Unmarshal(buf[:hlen], &cmd); err != nil {
		return nil, fmt.Errorf("malformed remoting header: %w", err)
	}
	cmd.Body = buf[hlen:]
	return &cmd, nil
}

// call is invoke plus: any code but the accepted ones is an error.
func (r *remoting) call(ctx context.Context, addr string, code int, ext map[string]string, body []byte, ok ...int) (*command, error) {
	resp, err := r.invoke(ctx, addr, code, ext, body)
	if err != nil {
		return nil, err
	}
	if resp.Code == resSuccess {
		return resp, nil
	}
	for _, c := range ok {
		if resp.Code == c {
			return resp, nil
		}
	}
	return nil, &brokerError{addr: addr, code: resp.Code, remark: resp.Remark}
}

// onNameServer asks the name servers in turn until one answers.
func (r *remoting) onNameServer(ctx context.Context, code int, ext map[string]string, ok ...int) (*command, error) {
	var errs []error
	for _, ns := range r.nameServers {
		resp, err := r.call(ctx, ns, code, ext, nil, ok...)
		if err == nil {
			return resp, nil
		}
		var be *brokerError
		if errors.As(err, &be) || ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, fmt.Errorf("name server %s: %w", ns, err))
	}
	return nil, errors.Join(errs...)
}

// fastjsonKeys matches the unquoted numeric map keys the Java name server
// writes ({0:"host:port"}), which encoding/json refuses.
var fastjsonKeys = regexp.MustCompile(`([{,]\s*)(-?\d+)(\s*:)`)

func decodeJavaJSON(b []byte, v any) error {
	return json.Unmarshal(fastjsonKeys.ReplaceAll(b, []byte(`$1"$2"$3`)), v)
}

type brokerData struct {
	Cluster     string            `json:"cluster"`
	BrokerName  string            `json:"brokerName"`
	BrokerAddrs map[string]string `json:"brokerAddrs"`
}

// master is the address of broker id 0, else of any broker of the set.
func (b brokerData) master() string {
	if a := b.BrokerAddrs["0"]; a != "" {
		return a
	}
	ids := make([]string, 0, len(b.BrokerAddrs))
	for id := range b.BrokerAddrs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return ""
	}
	return b.BrokerAddrs[ids[0]]
}

type queueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
}

type routeData struct {
	QueueDatas  []queueData  `json:"queueDatas"`
	BrokerDatas []brokerData `json:"brokerDatas"`
}

func (rd *routeData) brokerAddr(name string) string {
	for _, b := range rd.BrokerDatas {
		if b.BrokerName == name {
			return b.master()
		}
	}
	return ""
}

var errNoTopic = errors.New("topic does not exist")

func (r *remoting) route(ctx context.Context, topic string) (*routeData, error) {
	resp, err := r.onNameServer(ctx, codeGetRouteInfo, map[string]string{"topic": topic}, resTopicNotExist)
	if err != nil {
		return nil, err
	}
	if resp.Code == resTopicNotExist {
		return nil, errNoTopic
	}
	var rd routeData
	if err := decodeJavaJSON(resp.Body, &rd); err != nil {
		return nil, fmt.Errorf("route of topic %s: %w", topic, err)
	}
	return &rd, nil
}

// masters returns every broker set's master address, by broker name.
func (r *remoting) masters(ctx context.Context) (map[string]string, error) {
	resp, err := r.onNameServer(ctx, codeGetClusterInfo, nil)
	if err != nil {
		return nil, err
	}
	var info struct {
		BrokerAddrTable map[string]brokerData `json:"brokerAddrTable"`
	}
	if err := decodeJavaJSON(resp.Body, &info); err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	out := map[string]string{}
	for name, b := range info.BrokerAddrTable {
		if a := b.master(); a != "" {
			out[name] = a
		}
	}
	return out, nil
}

func queueExt(topic string, queue int) map[string]string {
	return map[string]string{"topic": topic, "queueId": strconv.Itoa(queue)}
}

func parseOffset(resp *command) (int64, error) {
	v, err := strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("answer without a valid offset: %q", resp.ExtFields["offset"])
	}
	return v, nil
}

func (r *remoting) maxOffset(ctx context.Context, addr, topic string, queue int) (int64, error) {
	resp, err := r.call(ctx, addr, codeGetMaxOffset, queueExt(topic, queue), nil)
	if err != nil {
		return 0, err
	}
	return parseOffset(resp)
}

func (r *remoting) minOffset(ctx context.Context, addr, topic string, queue int) (int64, error) {
	resp, err := r.call(ctx, addr, codeGetMinOffset, queueExt(topic, queue), nil)
	if err != nil {
		return 0, err
	}
	return parseOffset(resp)
}

// consumerOffset is the group's committed offset of a queue; found is false
// when the group never committed one there.
func (r *remoting) consumerOffset(ctx context.Context, addr, group, topic string, queue int) (off int64, found bool, err error) {
	ext := queueExt(topic, queue)
	ext["consumerGroup"] = group
	resp, err := r.call(ctx, addr, codeQueryConsumerOffset, ext, nil, resQueryNotFound)
	if err != nil {
		return 0, false, err
	}
	if resp.Code == resQueryNotFound {
		return 0, false, nil
	}
	off, err = parseOffset(resp)
	return off, err == nil, err
}

// createTopic is UPDATE_AND_CREATE_TOPIC with the fields mqadmin updateTopic
// sends; on an existing topic it changes the queue counts.
func (r *remoting) createTopic(ctx context.Context, addr, topic string, queues int) error {
	n := strconv.Itoa(queues)
	_, err := r.call(ctx, addr, codeUpdateCreateTopic, map[string]string{
		"topic":           topic,
		"defaultTopic":    probeTopic,
		"readQueueNums":   n,
		"writeQueueNums":  n,
		"perm":            "6", // read and write
		"topicFilterType": "SINGLE_TAG",
		"topicSysFlag":    "0",
		"order":           "false",
	}, nil)
	return err
}

// consumers lists the client ids of the group's members a broker knows.
func (r *remoting) consumers(ctx context.Context, addr, group string) ([]string, error) {
	resp, err := r.call(ctx, addr, codeGetConsumerList, map[string]string{"consumerGroup": group}, nil)
	if err != nil {
		return nil, err
	}
	var body struct {
		IDs []string `json:"consumerIdList"`
	}
	if err := decodeJavaJSON(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("consumer list of group %s: %w", group, err)
	}
	return body.IDs, nil
}
