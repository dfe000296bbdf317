package etcdembed

import (
	"context"
	"log/slog"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// expectedOnClose are messages etcd's embed package logs at error level
// when it is closed on purpose: its listeners' accept loops report the
// closed socket. They are not errors of ours, so they are dropped.
var expectedOnClose = []string{"mux: server closed", "use of closed network connection", "http: Server closed"}

// quietWarnings are start-up warnings that do not apply to a development
// single node (one port for HTTP and gRPC, unsigned simple tokens): they
// are logged at debug.
var quietWarnings = []string{"single port", "simple token"}

// slogCore is a zapcore.Core that writes into a slog.Logger, so the
// embedded server logs where the rest of kaas does, with kaas's level.
type slogCore struct {
	log    *slog.Logger
	fields []zapcore.Field
}

// zapLogger wraps log as a *zap.Logger for etcd's ZapLoggerBuilder.
func zapLogger(log *slog.Logger) *zap.Logger {
	return zap.New(&slogCore{log: log.With("component", "etcd")})
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.log.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	level := slogLevel(e.Level)
	if e.Level >= zapcore.WarnLevel && mentions(e.Message, enc.Fields, expectedOnClose) {
		return nil
	}
	if e.Level == zapcore.WarnLevel && mentions(e.Message, nil, quietWarnings) {
		level = slog.LevelDebug
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	c.log.LogAttrs(context.Background(), level, e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// mentions reports whether the message or a string field contains one of
// the phrases.
func mentions(msg string, fields map[string]any, phrases []string) bool {
	texts := []string{msg}
	for _, v := range fields {
		if s, ok := v.(string); ok {
			texts = append(texts, s)
		}
	}
	for _, t := range texts {
		for _, want := range phrases {
			if strings.Contains(t, want) {
				return true
			}
		}
	}
	return false
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		// etcd is chatty at info (every raft step at start-up): keep it
		// one level down so a broker's log stays readable.
		return slog.LevelDebug
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}
