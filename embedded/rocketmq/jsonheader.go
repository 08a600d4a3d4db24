package rocketmq

import (
	"strconv"
	"unicode/utf8"
)

// Every request carries a small JSON header; encoding/json's reflection was
// the largest server-side cost per message, so the common shape is parsed and
// written by hand. Anything unusual falls back to encoding/json.

// fastDecodeHeader parses a header made only of the known keys with plain
// values. ok=false means "use encoding/json", not "invalid".
func fastDecodeHeader(b []byte) (cmd *command, ok bool) {
	p := jsonParser{b: b}
	cmd = &command{}
	if !p.consume('{') {
		return nil, false
	}
	if p.consume('}') {
		return cmd, p.end()
	}
	for {
		key, ok := p.str()
		if !ok || !p.consume(':') {
			return nil, false
		}
		switch key {
		case "code":
			v, ok := p.int(64)
			if !ok {
				return nil, false
			}
			cmd.Code = int(v)
		case "version":
			v, ok := p.int(64)
			if !ok {
				return nil, false
			}
			cmd.Version = int(v)
		case "opaque":
			v, ok := p.int(32)
			if !ok {
				return nil, false
			}
			cmd.Opaque = int32(v)
		case "flag":
			v, ok := p.int(32)
			if !ok {
				return nil, false
			}
			cmd.Flag = int32(v)
		case "remark":
			if cmd.Remark, ok = p.str(); !ok {
				return nil, false
			}
		case "language":
			if cmd.Language, ok = p.str(); !ok {
				return nil, false
			}
		case "serializeTypeCurrentRPC":
			if _, ok = p.str(); !ok {
				return nil, false
			}
		case "extFields":
			// Like encoding/json, a repeated object merges into the map.
			if cmd.ExtFields == nil {
				cmd.ExtFields = make(map[string]string)
			}
			if !p.consume('{') {
				return nil, false
			}
			if !p.consume('}') {
				for {
					k, ok := p.str()
					if !ok || !p.consume(':') {
						return nil, false
					}
					v, ok := p.str()
					if !ok {
						return nil, false
					}
					cmd.ExtFields[k] = v
					if p.consume('}') {
						break
					}
					if !p.consume(',') {
						return nil, false
					}
				}
			}
		default:
			return nil, false
		}
		if p.consume('}') {
			return cmd, p.end()
		}
		if !p.consume(',') {
			return nil, false
		}
	}
}

type jsonParser struct {
	b []byte
	i int
}

func (p *jsonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) consume(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *jsonParser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// int accepts JSON integer syntax only.
func (p *jsonParser) int(bits int) (int64, bool) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || (p.b[digits] == '0' && p.i-digits > 1) {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, bits)
	return v, err == nil
}

// str reads a string; surrogate escapes and invalid UTF-8 are left to
// encoding/json, which replaces them.
func (p *jsonParser) str() (string, bool) {
	if !p.consume('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\':
			return p.escapedStr(start)
		case c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

func (p *jsonParser) escapedStr(start int) (string, bool) {
	out := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if p.i+4 > len(p.b) {
				return "", false
			}
			r, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 32)
			if err != nil || (r >= 0xD800 && r < 0xE000) {
				return "", false
			}
			out = utf8.AppendRune(out, rune(r))
			p.i += 4
		default:
			return "", false
		}
	}
	return "", false
}

// appendJSONHeader writes a response header as encoding/json would.
func appendJSONHeader(b []byte, c *command) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(c.Code), 10)
	b = append(b, `,"language":"JAVA","version":`...)
	b = strconv.AppendInt(b, int64(c.Version), 10)
	b = append(b, `,"opaque":`...)
	b = strconv.AppendInt(b, int64(c.Opaque), 10)
	b = append(b, `,"flag":`...)
	b = strconv.AppendInt(b, int64(c.Flag), 10)
	if c.Remark != "" {
		b = append(b, `,"remark":`...)
		b = appendJSONString(b, c.Remark)
	}
	if len(c.ExtFields) > 0 {
		b = append(b, `,"extFields":{`...)
		first := true
		for k, v := range c.ExtFields {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, v)
		}
		b = append(b, '}')
	}
	return append(b, `,"serializeTypeCurrentRPC":"JSON"}`...)
}

func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
