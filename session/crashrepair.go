package session

// CrashRepair computes what a resume appends to repair the observed log, as
// one batch: the closers of its interrupted turn (see Closers), then the
// session/end-seed marker unless the log, closers included, already ends
// with one. last is the final event observed, nil for an empty log; now
// (Unix milliseconds) is the marker's time after an empty log, otherwise the
// marker takes the time of the seed's last event. The marker's seq follows
// the closers (0 after an empty log). It returns the batch and how many of
// its events are closers; the batch holds a marker exactly when it is longer
// than that. An empty batch means there is nothing to repair.
func (s *TurnScanner) CrashRepair(last *Event, now int64) (batch []Event, closers int, err error) {
	if last != nil {
		batch, err = s.Closers(*last)
		if err != nil {
			return nil, 0, err
		}
	}
	closers = len(batch)
	// The end-seed rule looks only at the seed's last event: the last
	// closer, or the last stored event.
	var tail []Event
	switch {
	case len(batch) > 0:
		tail = batch[len(batch)-1:]
	case last != nil:
		tail = []Event{*last}
	}
	if m, due := EndSeedMarker(tail, false, EndSeedTime(tail, now)); due {
		m.Seq = 0
		if len(tail) > 0 {
			m.Seq = tail[0].Seq + 1
		}
		batch = append(batch, m)
	}
	return batch, closers, nil
}
