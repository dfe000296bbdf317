//go:build !linux

package server

// Elsewhere every answer goes through gnet's queue (direct_linux.go).
func canWriteDirect(int) bool { return false }

func writevDirect(int, [][]byte) int { return 0 }
