package broker_test

import (
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	gometrics "github.com/rcrowley/go-metrics"
	"github.com/twmb/franz-go/pkg/kadm"
	xscram "github.com/xdg-go/scram"

	"kaas/broker/brokertest"
	"kaas/broker/brokertest/tools"
)

// librdkafka through kcat and confluent-kafka-python, over SASL_SSL with
// SCRAM-SHA-512 and over mutual TLS, with ACLs granting what they use.
func TestSecureInteropLibrdkafka(t *testing.T) {
	s := startSecure(t)
	ctx := brokertest.Context(t, 2*time.Minute)
	cert := s.pki.Issue("rdkafka", brokertest.CertOptions{Subject: pkix.Name{CommonName: clientCN, Organization: []string{"kaas"}}})
	admin := s.admin(t, "admin")
	for _, topic := range []string{"rdk-scram", "rdk-mtls", "py-scram", "py-mtls"} {
		if _, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{aliceUser, clientCert} {
		s.grant(t, kadm.NewACLs().Allow(p).Topics("rdk-", "py-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite, kadm.OpRead))
		s.grant(t, kadm.NewACLs().Allow(p).Groups("py-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
	}
	scram512 := []string{"security.protocol=SASL_SSL", "sasl.mechanisms=SCRAM-SHA-512", "sasl.username=alice",
		"sasl.password=alice-secret", "ssl.ca.location=" + s.pki.CAFile}
	mtls := []string{"security.protocol=SSL", "ssl.ca.location=" + s.pki.CAFile,
		"ssl.certificate.location=" + cert.CertFile, "ssl.key.location=" + cert.KeyFile}
	kcatArgs := func(listener string, conf []string, more ...string) []string {
		args := []string{"-b", s.addr(listener)}
		for _, c := range conf {
			args = append(args, "-X", c)
		}
		return append(args, more...)
	}

	for _, tc := range []struct {
		listener, topic string
		conf            []string
	}{{lSASLSSL, "rdk-scram", scram512}, {lSSL, "rdk-mtls", mtls}} {
		kcat(t, "one\ntwo\n", kcatArgs(tc.listener, tc.conf, "-t", tc.topic, "-P", "-q")...)
		if out := kcat(t, "", kcatArgs(tc.listener, tc.conf, "-t", tc.topic, "-C", "-e", "-q")...); strings.TrimSpace(out) != "one\ntwo" {
			t.Errorf("kcat over %s read %q", tc.listener, out)
		}
	}
	// Denied: a topic alice has no ACL for; and a wrong password.
	if out, err := kcatFails(t, kcatArgs(lSASLSSL, scram512, "-t", "payments", "-P")...); err == nil || !strings.Contains(out, "authorization failed") {
		t.Errorf("kcat producing without an ACL: %v\n%s", err, out)
	}
	wrong := append(append([]string{}, scram512[:3]...), "sasl.password=wrong", scram512[4])
	if out, err := kcatFails(t, kcatArgs(lSASLSSL, wrong, "-L", "-m", "1")...); err == nil || !strings.Contains(out, "Authentication failed") {
		t.Errorf("kcat with a wrong password: %v\n%s", err, out)
	}

	py := tools.Python(t)
	for _, tc := range []struct {
		listener, topic string
		conf            []string
	}{{lSASLSSL, "py-scram", scram512}, {lSSL, "py-mtls", mtls}} {
		cmd := exec.Command(py, append([]string{"testdata/confluent_secure.py", s.addr(tc.listener), tc.topic, "py-" + tc.topic}, tc.conf...)...)
		out, err := cmd.CombinedOutput()
		var got struct {
			Read  []string
			Error string
		}
		if jerr := json.Unmarshal(lastLine(out), &got); err != nil || jerr != nil || len(got.Read) != 5 {
			t.Errorf("confluent-kafka over %s: %v %v\n%s", tc.listener, err, jerr, out)
		}
	}
}

// kcatFails runs kcat expecting it to fail; it returns the output.
func kcatFails(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("kcat", args...)
	cmd.Stdin = strings.NewReader("x\n")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	return string(out), err
}

func lastLine(out []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return []byte(lines[len(lines)-1])
}

// sarama with SCRAM-SHA-256 over SASL_PLAINTEXT: a synchronous producer
// and a partition consumer, with the ACLs they need.
func TestSecureInteropSarama(t *testing.T) {
	s := startSecure(t)
	ctx := brokertest.Context(t, time.Minute)
	admin := s.admin(t, "admin")
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "sarama"); err != nil {
		t.Fatal(err)
	}
	s.grant(t, kadm.NewACLs().Allow(aliceUser).Topics("sarama").Operations(kadm.OpWrite, kadm.OpRead))
	cfg := saramaConfig("alice", sarama.SASLTypeSCRAMSHA256)
	producer, err := sarama.NewSyncProducer([]string{s.addr(lSASL)}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for i := 0; i < 3; i++ {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "sarama", Value: sarama.StringEncoder(fmt.Sprint("s", i))}); err != nil {
			t.Fatalf("sarama produce: %v", err)
		}
	}
	consumer, err := sarama.NewConsumer([]string{s.addr(lSASL)}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition("sarama", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for i := 0; i < 3; i++ {
		select {
		case m := <-pc.Messages():
			if string(m.Value) != fmt.Sprint("s", i) {
				t.Fatalf("sarama read %q at %d", m.Value, i)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("sarama consumer read nothing")
		}
	}
	// Denied: a topic alice may not write.
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "sarama-denied"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "sarama-denied", Value: sarama.StringEncoder("x")}); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Errorf("sarama producing without an ACL: %v", err)
	}
}

// sarama's metrics registry starts a process-wide meter goroutine that
// never ends; the leak check would (rightly) flag it.
func init() { gometrics.UseNilMetrics = true }

// xscramFor is xdg-go/scram's hash for a sarama SCRAM mechanism.
func xscramFor(mech sarama.SASLMechanism) xscram.HashGeneratorFcn {
	if mech == sarama.SASLTypeSCRAMSHA512 {
		return xscram.SHA512
	}
	return xscram.SHA256
}

// saramaSCRAM adapts xdg-go/scram to sarama's SCRAMClient.
type saramaSCRAM struct {
	gen  xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (c *saramaSCRAM) Begin(user, password, authzID string) error {
	cl, err := c.gen.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = cl.NewConversation()
	return nil
}

func (c *saramaSCRAM) Step(challenge string) (string, error) { return c.conv.Step(challenge) }
func (c *saramaSCRAM) Done() bool                            { return c.conv.Done() }
