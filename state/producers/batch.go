package producers

// Batch is what the producer state reads of a data batch: the fields of
// its header (storage/partlog.BatchHeader, whose names these are) that
// producer checks use. The partition actor fills it from the header it
// parsed, so the state machine depends on no storage type.
type Batch struct {
	BaseOffset      int64
	LastOffsetDelta int32
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	Transactional   bool
}

// LastOffset is the offset of the batch's last record.
func (b Batch) LastOffset() int64 { return b.BaseOffset + int64(b.LastOffsetDelta) }

// IsTransactional reports a batch of a transaction.
func (b Batch) IsTransactional() bool { return b.Transactional }
