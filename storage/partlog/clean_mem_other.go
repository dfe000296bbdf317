//go:build !linux

package partlog

// mapMemory: elsewhere the map's tables are on the Go heap
// (clean_mem_linux.go maps them apart, in huge pages).
func mapMemory(n int) ([]byte, error) { return make([]byte, n), nil }

func freeMapMemory([]byte) {}
