//go:build !linux

package server

import "github.com/panjf2000/gnet/v2"

// Pausing reads edits gnet's epoll registration (readpause_linux.go);
// elsewhere it is unavailable and maxUnreadWhilePaused alone bounds what a
// waiting connection holds.

func loopEpollFD(gnet.Conn) int { return -1 }

func (cn *conn) setReadInterest(bool) {}
