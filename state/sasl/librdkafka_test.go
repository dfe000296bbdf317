package sasl

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"strings"
	"testing"
)

// librdkafkaFinal builds the client-final message librdkafka before 2.6.1
// sends: its own nonce, then the server's (which starts with its own).
func librdkafkaFinal(t *testing.T, clientNonce, clientFirstBare, serverFirst, password string, nonceOf func(serverNonce string) string) string {
	t.Helper()
	attrs := map[string]string{}
	for _, f := range strings.Split(serverFirst, ",") {
		attrs[f[:1]] = f[2:]
	}
	salt, _ := base64.StdEncoding.DecodeString(attrs["s"])
	salted, err := SaltedPassword(ScramSHA512, password, salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, s string) []byte {
		m := hmac.New(sha512.New, key)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := sha512.Sum512(clientKey)
	withoutProof := "c=biws,r=" + nonceOf(attrs["r"])
	sig := mac(stored[:], clientFirstBare+","+serverFirst+","+withoutProof)
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)
}

func TestLibrdkafkaDoubledNonce(t *testing.T) {
	s := testServer(t, users{"alice": {ScramSHA512: mustCred(t, ScramSHA512, "secret")}})
	const cnonce = "w`NFAp[rhoT\\KO~HKN8AVf`vlNrZ;i_3"
	bare := "n=alice,r=" + cnonce
	for _, tc := range []struct {
		name, password string
		nonce          func(string) string
		ok             bool
	}{
		{"doubled nonce", "secret", func(sn string) string { return cnonce + sn }, true},
		{"doubled nonce, wrong password", "wrong", func(sn string) string { return cnonce + sn }, false},
		{"exact nonce", "secret", func(sn string) string { return sn }, true},
		{"nonce without the server's", "secret", func(sn string) string { return cnonce + "x" }, false},
		{"server nonce with a tail", "secret", func(sn string) string { return sn + "x" }, false},
	} {
		conv, err := s.Start(ScramSHA512)
		if err != nil {
			t.Fatal(err)
		}
		first, _, err := conv.Step([]byte("n,," + bare))
		if err != nil {
			t.Fatal(err)
		}
		final := librdkafkaFinal(t, cnonce, bare, string(first), tc.password, tc.nonce)
		out, done, err := conv.Step([]byte(final))
		if tc.ok != (err == nil && done && conv.User() == "alice") {
			t.Errorf("%s: done %v user %q err %v", tc.name, done, conv.User(), err)
		}
		if tc.ok && !strings.HasPrefix(string(out), "v=") {
			t.Errorf("%s: server-final %q", tc.name, out)
		}
	}
}
