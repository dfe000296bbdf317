package system

import (
	"sync/atomic"
	"time"
)

// MailboxStats counts one actor's mailbox traffic. It is protoactor mailbox
// middleware: posted and received are bumped on the sending and the
// receiving goroutine, so depth is their difference, read without asking
// the actor anything.
type MailboxStats struct {
	posted   atomic.Int64
	received atomic.Int64
	lastNano atomic.Int64
}

func (m *MailboxStats) MailboxStarted()   {}
func (m *MailboxStats) MailboxEmpty()     {}
func (m *MailboxStats) MessagePosted(any) { m.posted.Add(1) }
func (m *MailboxStats) MessageReceived(any) {
	m.received.Add(1)
	m.lastNano.Store(time.Now().UnixNano())
}

// Depth is the number of messages waiting.
func (m *MailboxStats) Depth() int64 { return m.posted.Load() - m.received.Load() }

// Processed is the number of messages taken from the mailbox.
func (m *MailboxStats) Processed() int64 { return m.received.Load() }

// LastMessage is when the actor last took a message (zero if never).
func (m *MailboxStats) LastMessage() time.Time {
	n := m.lastNano.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
