package kafka

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// SCRAM (RFC 5802) client for sarama, which leaves the algorithm to the
// application. Error texts never include the password or derived keys.

var (
	sha256Hash = sha256.New
	sha512Hash = sha512.New
)

type scramClient struct {
	h        func() hash.Hash
	user     string
	password string
	authz    string

	step        int
	nonce       string
	clientFirst string // client-first-message-bare
	serverSig   []byte
	done        bool
}

func newSCRAM(h func() hash.Hash) *scramClient { return &scramClient{h: h} }

func (s *scramClient) Begin(user, password, authzID string) error {
	s.user, s.password, s.authz = user, password, authzID
	s.step, s.done = 0, false
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("scram: nonce: %w", err)
	}
	s.nonce = base64.RawStdEncoding.EncodeToString(b)
	return nil
}

func (s *scramClient) gs2Header() string {
	if s.authz == "" {
		return "n,,"
	}
	return "n,a=" + scramEscape(s.authz) + ","
}

func (s *scramClient) Step(challenge string) (string, error) {
	switch s.step {
	case 0:
		s.step++
		s.clientFirst = "n=" + scramEscape(s.user) + ",r=" + s.nonce
		return s.gs2Header() + s.clientFirst, nil
	case 1:
		s.step++
		return s.final(challenge)
	case 2:
		s.step++
		attrs := scramAttrs(challenge)
		if e, ok := attrs["e"]; ok {
			return "", fmt.Errorf("scram: server rejected authentication: %s", e)
		}
		v, err := base64.StdEncoding.DecodeString(attrs["v"])
		if err != nil || !hmac.Equal(v, s.serverSig) {
			return "", errors.New("scram: server signature does not verify")
		}
		s.done = true
		return "", nil
	}
	return "", errors.New("scram: unexpected extra challenge")
}

func (s *scramClient) final(serverFirst string) (string, error) {
	attrs := scramAttrs(serverFirst)
	nonce := attrs["r"]
	if !strings.HasPrefix(nonce, s.nonce) || len(nonce) == len(s.nonce) {
		return "", errors.New("scram: server nonce does not extend the client nonce")
	}
	salt, err := base64.StdEncoding.DecodeString(attrs["s"])
	if err != nil || len(salt) == 0 {
		return "", errors.New("scram: server sent no valid salt")
	}
	iter, err := strconv.Atoi(attrs["i"])
	if err != nil || iter < 1 {
		return "", errors.New("scram: server sent no valid iteration count")
	}
	salted, err := pbkdf2.Key(s.h, s.password, salt, iter, s.h().Size())
	if err != nil {
		return "", fmt.Errorf("scram: key derivation: %w", err)
	}
	clientKey := s.hmac(salted, "Client Key")
	h := s.h()
	h.Write(clientKey)
	storedKey := h.Sum(nil)

	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(s.gs2Header())) + ",r=" + nonce
	authMsg := s.clientFirst + "," + serverFirst + "," + withoutProof
	clientSig := s.hmac(storedKey, authMsg)
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ clientSig[i]
	}
	s.serverSig = s.hmac(s.hmac(salted, "Server Key"), authMsg)
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), nil
}

func (s *scramClient) hmac(key []byte, msg string) []byte {
	m := hmac.New(s.h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func (s *scramClient) Done() bool { return s.done }

func scramEscape(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}

func scramAttrs(msg string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(msg, ",") {
		if len(kv) >= 2 && kv[1] == '=' {
			out[kv[:1]] = kv[2:]
		}
	}
	return out
}
