package chaos

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// clientLog is a franz-go client's log, one file per workload in the
// run's directory: what a client saw is evidence as much as the brokers'
// logs are.
type clientLog struct {
	mu sync.Mutex
	w  *bufio.Writer
	f  *os.File
	// unconfirmed is set when franz-go says an end of transaction's
	// outcome is unconfirmed yet reports it as an abort (a
	// GroupTransactSession downgrades UNKNOWN_SERVER_ERROR that way): the
	// exactly-once workload then records the outcome as unknown.
	unconfirmed atomic.Bool
}

var _ kgo.Logger = (*clientLog)(nil)

func (l *clientLog) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *clientLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if strings.Contains(msg, "unknown server error") || strings.Contains(msg, "unconfirmed") {
		l.unconfirmed.Store(true)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", time.Now().Format("15:04:05.000000"), level, msg)
	for i := 0; i+1 < len(keyvals); i += 2 {
		fmt.Fprintf(&b, " %v=%v", keyvals[i], keyvals[i+1])
	}
	b.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		l.w.WriteString(b.String())
	}
}

func (l *clientLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		l.w.Flush()
		l.f.Close()
		l.w, l.f = nil, nil
	}
}

// clientLogs opens one log per workload name under dir/clients.
type clientLogs struct {
	dir  string
	mu   sync.Mutex
	logs map[string]*clientLog
}

func (c *clientLogs) get(name string) *clientLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.logs[name]; l != nil {
		return l
	}
	if c.logs == nil {
		c.logs = map[string]*clientLog{}
	}
	l := &clientLog{}
	if err := os.MkdirAll(c.dir, 0o755); err == nil {
		if f, err := os.OpenFile(filepath.Join(c.dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			l.f, l.w = f, bufio.NewWriterSize(f, 1<<16)
		}
	}
	c.logs[name] = l
	return l
}

func (c *clientLogs) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.logs {
		l.close()
	}
}
