package bench

import (
	"os"

	"golang.org/x/sys/unix"
)

// openDirect opens name with O_DIRECT: transfers bypass the page cache.
func openDirect(name string, flag int) (*os.File, error) {
	return os.OpenFile(name, flag|unix.O_DIRECT, 0)
}
