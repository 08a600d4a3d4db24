package rocketmq

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Remoting protocol constants (see RocketMQ RemotingCommand / RemotingSysResponseCode).
const (
	serializeJSON     = byte(0)
	serializeRocketMQ = byte(1)

	flagResponse = int32(1)
	flagOneway   = int32(2)

	// maxFrameLen mirrors the Java default com.rocketmq.remoting.frameMaxLength.
	maxFrameLen = 16 << 20

	// protocolVersion is what responses carry; the Go client records it as the
	// broker version and only needs it to be >= 0.
	protocolVersion = 317

	writeTimeout = 30 * time.Second

	// maxInflightPerConn bounds concurrently served requests of one connection;
	// when reached, the reader stops reading, which pushes back on the client.
	// A consumer parks one pull per assigned queue, so this is generous.
	maxInflightPerConn = 4096
)

// command is one decoded remoting frame.
type command struct {
	Code      int
	Version   int
	Opaque    int32
	Flag      int32
	Remark    string
	ExtFields map[string]string
	Body      []byte
	Language  string // client language, e.g. "GO" or "JAVA"

	serializeType byte
}

func (c *command) isResponse() bool { return c.Flag&flagResponse != 0 }

// isOneway reports whether the sender awaits no answer. The Go client sends
// its oneway requests without the oneway flag; answering them anyway can leave
// unread data in its socket when it closes, which turns the close into a reset
// that discards its last requests (the offsets it persists on Shutdown).
func (c *command) isOneway() bool {
	if c.Flag&flagOneway != 0 {
		return true
	}
	return c.Language == "GO" && (c.Code == reqUpdateConsumerOffset || c.Code == reqEndTransaction)
}

func (c *command) ext(key string) string {
	if c.ExtFields == nil {
		return ""
	}
	return c.ExtFields[key]
}

// jsonHeader is the JSON form of a header. Language is kept raw because Java
// sends an enum name and other clients may send numbers.
type jsonHeader struct {
	Code                    int               `json:"code"`
	Language                json.RawMessage   `json:"language,omitempty"`
	Version                 int               `json:"version"`
	Opaque                  int32             `json:"opaque"`
	Flag                    int32             `json:"flag"`
	Remark                  string            `json:"remark,omitempty"`
	ExtFields               map[string]string `json:"extFields,omitempty"`
	SerializeTypeCurrentRPC string            `json:"serializeTypeCurrentRPC,omitempty"`
}

var errFrame = errors.New("malformed remoting frame")

// readCommand reads one frame. Any error means the connection is unusable.
func readCommand(r *bufio.Reader) (*command, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err
	}
	total := binary.BigEndian.Uint32(lenBuf[:])
	if total < 4 || total > maxFrameLen {
		return nil, fmt.Errorf("%w: frame length %d", errFrame, total)
	}
	buf := make([]byte, total)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return decodeFrame(buf)
}

// decodeFrame decodes a frame without its leading length field.
func decodeFrame(buf []byte) (*command, error) {
	if len(buf) < 4 {
		return nil, errFrame
	}
	mark := binary.BigEndian.Uint32(buf[:4])
	st := byte(mark >> 24)
	hlen := int(mark & 0xFFFFFF)
	if hlen > len(buf)-4 {
		return nil, fmt.Errorf("%w: header length %d exceeds frame", errFrame, hlen)
	}
	header := buf[4 : 4+hlen]
	var cmd *command
	var err error
	switch st {
	case serializeJSON:
		cmd, err = decodeJSONHeader(header)
	case serializeRocketMQ:
		cmd, err = decodeBinaryHeader(header)
	default:
		err = fmt.Errorf("%w: unknown serialize type %d", errFrame, st)
	}
	if err != nil {
		return nil, err
	}
	cmd.serializeType = st
	if body := buf[4+hlen:]; len(body) > 0 {
		cmd.Body = body
	}
	return cmd, nil
}

func decodeJSONHeader(b []byte) (*command, error) {
	if cmd, ok := fastDecodeHeader(b); ok {
		return cmd, nil
	}
	var h jsonHeader
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%w: %v", errFrame, err)
	}
	var lang string
	if json.Unmarshal(h.Language, &lang) != nil {
		lang = string(h.Language)
	}
	return &command{Code: h.Code, Version: h.Version, Opaque: h.Opaque, Flag: h.Flag,
		Remark: h.Remark, ExtFields: h.ExtFields, Language: lang}, nil
}

// decodeBinaryHeader decodes the ROCKETMQ serialize type: code(2) language(1)
// version(2) opaque(4) flag(4) remarkLen(4) remark extLen(4) ext.
func decodeBinaryHeader(b []byte) (*command, error) {
	if len(b) < 21 {
		return nil, errFrame
	}
	cmd := &command{
		Language: binaryLanguages[b[2]],
		Code:     int(int16(binary.BigEndian.Uint16(b[0:2]))),
		Version:  int(int16(binary.BigEndian.Uint16(b[3:5]))),
		Opaque:   int32(binary.BigEndian.Uint32(b[5:9])),
		Flag:     int32(binary.BigEndian.Uint32(b[9:13])),
	}
	p := 13
	rl := int(binary.BigEndian.Uint32(b[p : p+4]))
	p += 4
	if rl < 0 || rl > len(b)-p-4 {
		return nil, errFrame
	}
	cmd.Remark = string(b[p : p+rl])
	p += rl
	el := int(binary.BigEndian.Uint32(b[p : p+4]))
	p += 4
	if el < 0 || el > len(b)-p {
		return nil, errFrame
	}
	ext := b[p : p+el]
	if len(ext) > 0 {
		cmd.ExtFields = make(map[string]string)
	}
	for len(ext) > 0 {
		if len(ext) < 2 {
			return nil, errFrame
		}
		kl := int(binary.BigEndian.Uint16(ext[:2]))
		ext = ext[2:]
		if kl > len(ext)-4 {
			return nil, errFrame
		}
		k := string(ext[:kl])
		ext = ext[kl:]
		vl := int(binary.BigEndian.Uint32(ext[:4]))
		ext = ext[4:]
		if vl < 0 || vl > len(ext) {
			return nil, errFrame
		}
		cmd.ExtFields[k] = string(ext[:vl])
		ext = ext[vl:]
	}
	return cmd, nil
}

// binaryLanguages maps LanguageCode ordinals used by the ROCKETMQ serializer.
var binaryLanguages = map[byte]string{0: "JAVA", 1: "CPP", 2: "DOTNET", 3: "PYTHON", 9: "GO", 12: "RUST"}

func encodeHeader(c *command, st byte) ([]byte, error) {
	if st == serializeRocketMQ {
		size := 21 + len(c.Remark)
		for k, v := range c.ExtFields {
			size += 6 + len(k) + len(v)
		}
		b := make([]byte, 0, size)
		b = binary.BigEndian.AppendUint16(b, uint16(int16(c.Code)))
		b = append(b, 0) // language JAVA
		b = binary.BigEndian.AppendUint16(b, uint16(int16(c.Version)))
		b = binary.BigEndian.AppendUint32(b, uint32(c.Opaque))
		b = binary.BigEndian.AppendUint32(b, uint32(c.Flag))
		b = binary.BigEndian.AppendUint32(b, uint32(len(c.Remark)))
		b = append(b, c.Remark...)
		extLen := 0
		for k, v := range c.ExtFields {
			extLen += 6 + len(k) + len(v)
		}
		b = binary.BigEndian.AppendUint32(b, uint32(extLen))
		for k, v := range c.ExtFields {
			b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
			b = append(b, k...)
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
		return b, nil
	}
	return appendJSONHeader(nil, c), nil
}

// conn is one accepted client connection.
type conn struct {
	nc     net.Conn
	remote string
	wmu    sync.Mutex
	sem    chan struct{}

	closeOnce sync.Once
	closed    chan struct{}
}

func newConn(nc net.Conn) *conn {
	return &conn{
		nc:     nc,
		remote: nc.RemoteAddr().String(),
		sem:    make(chan struct{}, maxInflightPerConn),
		closed: make(chan struct{}),
	}
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		_ = c.nc.Close()
	})
}

func (c *conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// write sends one command; writes are serialized because requests of one
// connection are served concurrently.
func (c *conn) write(cmd *command, st byte) error {
	hdr, err := encodeHeader(cmd, st)
	if err != nil {
		return err
	}
	if len(hdr) > 0xFFFFFF {
		return fmt.Errorf("header too large: %d bytes", len(hdr))
	}
	prefix := make([]byte, 8, 8+len(hdr))
	binary.BigEndian.PutUint32(prefix[0:4], uint32(4+len(hdr)+len(cmd.Body)))
	binary.BigEndian.PutUint32(prefix[4:8], uint32(st)<<24|uint32(len(hdr)))
	prefix = append(prefix, hdr...)
	bufs := net.Buffers{prefix}
	if len(cmd.Body) > 0 {
		bufs = append(bufs, cmd.Body)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := bufs.WriteTo(c.nc); err != nil {
		c.close()
		return err
	}
	return nil
}
