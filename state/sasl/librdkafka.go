package sasl

import (
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// librdkafka before 2.6.1 (confluentinc/librdkafka#4895) sends the client
// nonce twice in its client-final message: r=<client nonce><server nonce>,
// where the server nonce already starts with the client nonce. Apache
// Kafka 3.7 never compared the final nonce; since 3.8.1 (the fix for
// CVE-2024-56128) it requires the final nonce to end with the server's,
// which that librdkafka satisfies, so Debian's librdkafka 2.0.2 (kcat,
// python3-confluent-kafka) authenticates with SCRAM. xdg-go/scram follows
// RFC 5802 strictly (equal nonces), so the exchange is finished here for
// exactly that case, with Apache's rule: everything else goes through
// xdg-go/scram. The proof is checked as RFC 5802 §3 and xdg-go do it.

// scramFirst is what the first exchange fixed, for the final step.
type scramFirst struct {
	gs2Header   string // "n,," or "n,a=authzid,"
	clientBare  string // client-first-message-bare
	serverFirst string // server-first-message
	serverNonce string // its r= value
}

func parseFirst(clientFirst, serverFirst string) scramFirst {
	f := scramFirst{serverFirst: serverFirst}
	// gs2-header is the first two comma-separated fields.
	if i := strings.IndexByte(clientFirst, ','); i >= 0 {
		if j := strings.IndexByte(clientFirst[i+1:], ','); j >= 0 {
			f.gs2Header = clientFirst[:i+1+j+1]
			f.clientBare = clientFirst[i+1+j+1:]
		}
	}
	if nonce, ok := strings.CutPrefix(serverFirst, "r="); ok {
		f.serverNonce, _, _ = strings.Cut(nonce, ",")
	}
	return f
}

// clientFinalNonceCompat reports whether the client-final message carries
// a longer nonce that ends with the server's (the librdkafka form).
func (f scramFirst) clientFinalNonceCompat(clientFinal string) bool {
	nonce, ok := finalAttr(clientFinal, "r=")
	return ok && f.serverNonce != "" && f.gs2Header != "" && len(nonce) > len(f.serverNonce) && strings.HasSuffix(nonce, f.serverNonce)
}

func finalAttr(msg, prefix string) (string, bool) {
	for _, field := range strings.Split(msg, ",") {
		if v, ok := strings.CutPrefix(field, prefix); ok {
			return v, true
		}
	}
	return "", false
}

// finishCompat verifies a librdkafka client-final message: the channel
// binding is the gs2 header sent first, and the proof matches the stored
// key over the AuthMessage as the client computed it.
func (c *Conversation) finishCompat(clientFinal string) ([]byte, error) {
	cut := strings.LastIndex(clientFinal, ",p=")
	if cut < 0 || !strings.HasPrefix(clientFinal, "c="+base64.StdEncoding.EncodeToString([]byte(c.first.gs2Header))+",") {
		return nil, c.generic()
	}
	withoutProof := clientFinal[:cut]
	proof, err := base64.StdEncoding.DecodeString(clientFinal[cut+3:])
	if err != nil {
		return nil, c.generic()
	}
	authMessage := []byte(c.first.clientBare + "," + c.first.serverFirst + "," + withoutProof)
	mac := func(key []byte) []byte {
		m := hmac.New(c.hash, key)
		m.Write(authMessage)
		return m.Sum(nil)
	}
	clientSignature := mac(c.cred.StoredKey)
	if len(proof) != len(clientSignature) {
		return nil, c.generic()
	}
	clientKey := make([]byte, len(proof))
	subtle.XORBytes(clientKey, proof, clientSignature)
	h := c.hash()
	h.Write(clientKey)
	if !hmac.Equal(h.Sum(nil), c.cred.StoredKey) {
		return nil, c.generic()
	}
	return c.finish([]byte("v=" + base64.StdEncoding.EncodeToString(mac(c.cred.ServerKey))))
}
