package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Type is an event's place in an operation, as Jepsen's :type: an invoke,
// then one completion — ok (it happened as asked), fail (it certainly did
// not) or info (nobody knows).
type Type string

const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
)

// F is what an operation does.
type F string

const (
	// Send produces one record (Rec: topic, partition, value; the ok
	// completion carries the acknowledged offset). Txn names its
	// transaction, if any.
	Send F = "send"
	// End ends a transaction: the invoke carries Intent (commit or abort)
	// and, for the consume-transform-produce group, the input records the
	// transaction consumed (Recs); ok means it ended as intended, fail that
	// a commit certainly aborted, info that the outcome is unknown. A
	// transaction with sends and no End never asked to commit.
	End F = "end"
	// Poll is what a live consumer read (ok only; Recs, Isolation).
	Poll F = "poll"
	// Fault is the nemesis: invoke when a fault starts (Value its kind,
	// Note the target and hold), ok when it is healed.
	Fault F = "fault"
	// Exit is a broker that exited by itself after it had started (info).
	Exit F = "exit"
)

// Intents of an End.
const (
	Commit = "commit"
	Abort  = "abort"
)

// Isolation levels of reads.
const (
	ReadUncommitted = "read_uncommitted"
	ReadCommitted   = "read_committed"
)

// Event is one line of the history.
type Event struct {
	Index     int           `json:"i"`
	Time      time.Duration `json:"t"` // since the run started
	ID        int64         `json:"id"`
	Process   string        `json:"p"`
	Type      Type          `json:"type"`
	F         F             `json:"f"`
	Txn       string        `json:"txn,omitempty"`
	Intent    string        `json:"intent,omitempty"`
	Rec       *Rec          `json:"rec,omitempty"`
	Recs      []Rec         `json:"recs,omitempty"`
	Isolation string        `json:"iso,omitempty"`
	Value     string        `json:"v,omitempty"`
	Note      string        `json:"note,omitempty"`
	Err       string        `json:"err,omitempty"`
}

// Rec is a record where it was written or read.
type Rec struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	Value     string `json:"v"`
}

func (r Rec) String() string {
	return fmt.Sprintf("%s/%d@%d %q", r.Topic, r.Partition, r.Offset, r.Value)
}

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

func (r Rec) tp() tp { return tp{r.Topic, r.Partition} }

func (t tp) String() string { return fmt.Sprintf("%s/%d", t.topic, t.partition) }

// Recorder collects the history of a run, from many goroutines, and
// streams it to a file as JSON lines when one is given (so a run cut
// short still leaves its history behind).
type Recorder struct {
	mu     sync.Mutex
	start  time.Time
	events []Event
	nextID int64
	out    *bufio.Writer
	file   *os.File
}

// NewRecorder starts a history; path may be empty.
func NewRecorder(path string) (*Recorder, error) {
	r := &Recorder{start: time.Now()}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		r.file, r.out = f, bufio.NewWriterSize(f, 1<<16)
	}
	return r, nil
}

// Invoke records the start of an operation and returns its id, which
// its completion must carry.
func (r *Recorder) Invoke(e Event) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	e.ID, e.Type = r.nextID, Invoke
	r.add(e)
	return e.ID
}

// Complete records the completion of operation id.
func (r *Recorder) Complete(id int64, t Type, e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.ID, e.Type = id, t
	r.add(e)
}

// Note records an event that is not an operation of a client (a poll, a
// broker's exit).
func (r *Recorder) Note(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	e.ID = r.nextID
	r.add(e)
}

func (r *Recorder) add(e Event) {
	e.Index = len(r.events)
	e.Time = time.Since(r.start)
	r.events = append(r.events, e)
	if r.out != nil {
		b, _ := json.Marshal(e)
		r.out.Write(b)
		r.out.WriteByte('\n')
	}
}

// Events is a copy of the history so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Close flushes and closes the history file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file == nil {
		return nil
	}
	err := r.out.Flush()
	if cerr := r.file.Close(); err == nil {
		err = cerr
	}
	r.file, r.out = nil, nil
	return err
}

// ReadHistory reads a history written by a Recorder.
func ReadHistory(rd io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<16), 64<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("history line %d: %w", len(out)+1, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Final is what the run found once every fault had healed and the
// cluster had settled: a full read of every partition at both isolation
// levels, the offsets the exactly-once group committed, and the
// transactions still open.
type Final struct {
	Reads []PartitionRead `json:"reads"`
	// Group is the exactly-once group, InputTopic the topic it consumes;
	// GroupOffsets are its committed offsets (a partition absent from
	// them has none: the group starts at the beginning).
	Group        string `json:"group"`
	InputTopic   string `json:"input_topic"`
	GroupOffsets []Rec  `json:"group_offsets"` // Offset only
	// Open lists transactions a coordinator still reports Ongoing or
	// Prepare* after the settle ("id state").
	Open []string `json:"open,omitempty"`
}

// PartitionRead is one partition read from its start to its sentinel.
type PartitionRead struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Isolation string `json:"isolation"`
	Records   []Rec  `json:"records"`
	// Complete: the read reached the partition's acknowledged sentinel.
	Complete bool `json:"complete"`
	// HighWatermark and StableOffset are ListOffsets' answers
	// (read_uncommitted and read_committed) after the settle.
	HighWatermark int64  `json:"high_watermark"`
	StableOffset  int64  `json:"stable_offset"`
	Err           string `json:"err,omitempty"`
}

// ReadFinal reads a Final written as JSON.
func ReadFinal(rd io.Reader) (Final, error) {
	var f Final
	err := json.NewDecoder(rd).Decode(&f)
	return f, err
}
