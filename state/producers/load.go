package producers

// Load replaces the state's entries with entries (a snapshot's, read by
// storage/producersnap); Each lists them for the next snapshot.
func (s *State) Load(entries map[int64]Entry) {
	s.Reset()
	for pid, e := range entries {
		s.put(pid, &e)
	}
}

// Reset drops every entry (before a full replay).
func (s *State) Reset() {
	for pid := range s.entries {
		s.drop(pid)
	}
}
