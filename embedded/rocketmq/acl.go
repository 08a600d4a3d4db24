package rocketmq

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"sort"
)

const (
	extAccessKey     = "AccessKey"
	extSignature     = "Signature"
	extSecurityToken = "SecurityToken"
	extUniqueQuery   = "_UNIQUE_KEY_QUERY"
)

// checkACL verifies a request signature the way the Java PlainAccessValidator
// does: HMAC-SHA1 over the values of all ext fields except Signature, sorted
// by key, followed by the body. The error text never contains the secret.
func checkACL(accessKey, secretKey string, req *command) error {
	ak := req.ext(extAccessKey)
	sig := req.ext(extSignature)
	if ak == "" || sig == "" {
		return fmt.Errorf("ACL: request code %d carries no AccessKey/Signature; the broker requires credentials (check signature failed)", req.Code)
	}
	if ak != accessKey {
		return fmt.Errorf("ACL: unknown AccessKey %q (check signature failed)", ak)
	}
	if hmac.Equal([]byte(sig), []byte(signature(secretKey, req, false))) {
		return nil
	}
	// The Go client signs without SecurityToken even when it sends one.
	if req.ext(extSecurityToken) != "" &&
		hmac.Equal([]byte(sig), []byte(signature(secretKey, req, true))) {
		return nil
	}
	return fmt.Errorf("ACL: signature mismatch for AccessKey %q: wrong secret key (check signature failed)", ak)
}

func signature(secretKey string, req *command, skipToken bool) string {
	keys := make([]string, 0, len(req.ExtFields))
	for k := range req.ExtFields {
		if k == extSignature || k == extUniqueQuery || (skipToken && k == extSecurityToken) {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(secretKey))
	for _, k := range keys {
		mac.Write([]byte(req.ExtFields[k]))
	}
	mac.Write(req.Body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
