package server

// pauseReads stops reading the socket (see readpause_linux.go). It is
// applied again each time, since gnet may have registered the descriptor
// for reads again after a write.
func (cn *conn) pauseReads() {
	cn.setReadInterest(false)
	if !cn.readsOff {
		cn.readsOff = true
		cn.srv.met.paused(1)
	}
}

// resumeReads reads the socket again.
func (cn *conn) resumeReads() {
	if !cn.readsOff {
		return
	}
	cn.readsOff = false
	cn.srv.met.paused(-1)
	cn.setReadInterest(true)
}
