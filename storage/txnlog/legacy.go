package txnlog

import (
	"bytes"
	"hash/crc32"
	"strconv"

	"kaas/storage/durable"
	"kaas/storage/slotlog"
)

// Slot files written before the slot-log framing held one record per
// line: "<crc32c hex> <json>\n". They are converted on first open (the
// same corruption policy applies: a bad line followed by good ones is
// damage, a bad last line is a torn tail).

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// isLegacy reports whether data is in the line format.
func isLegacy(data []byte) bool {
	if len(data) < 10 || data[8] != ' ' {
		return false
	}
	_, err := strconv.ParseUint(string(data[:8]), 16, 32)
	return err == nil
}

func legacyLine(line []byte) (record, bool) {
	if len(line) < 10 || line[8] != ' ' {
		return record{}, false
	}
	want, err := strconv.ParseUint(string(line[:8]), 16, 32)
	if err != nil || uint32(want) != crc32.Checksum(line[9:], castagnoli) {
		return record{}, false
	}
	r, err := decodeRecord(line[9:])
	return r, err == nil
}

// convertLegacy rewrites a line-format file at path in the slot-log
// framing, applying the corruption policy to damaged lines.
func convertLegacy(env durable.Env, path string, data []byte) error {
	type line struct {
		at int
		r  record
		ok bool
	}
	var lines []line
	for off := 0; off < len(data); {
		nl := bytes.IndexByte(data[off:], '\n')
		end := off + nl
		if nl < 0 {
			end = len(data)
		}
		r, ok := legacyLine(data[off:end])
		lines = append(lines, line{off, r, ok && nl >= 0})
		off = end + 1
	}
	keep := lines
	for i, l := range lines {
		if l.ok {
			continue
		}
		laterGood := false
		for _, later := range lines[i+1:] {
			laterGood = laterGood || later.ok
		}
		if !laterGood {
			keep = lines[:i] // the torn tail of a crash
			break
		}
		// An intact line after a bad one: not a crash's torn tail.
		if err := env.Corrupt(store, path, int64(l.at), "a damaged record followed by intact ones"); err != nil {
			return err
		}
		break // quarantined: every intact line is kept
	}
	var buf []byte
	n := 0
	for _, l := range keep {
		if l.ok {
			buf = slotlog.AppendFrame(buf, int64(len(buf)), encodeRecord(l.r))
			n++
		}
	}
	env.Logger.Info("converted a transaction slot file to the slot-log format", "file", path, "records", n)
	return durable.WriteFile(env.FS, path, buf)
}
