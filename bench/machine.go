package bench

import (
	"os"
	"strconv"
	"strings"
)

// loadAverage is the machine's one-minute load average (0 where
// /proc/loadavg cannot be read). The cores are shared: a figure taken at
// load 20 on 2 cores says little on its own, and the load says so.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
