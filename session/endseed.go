package session

import (
	"encoding/json"
	"errors"

	"github.com/sessionflow/sessionflow/wire"
)

// Errors of the inherited-prefix marker check. Their texts are those of
// FORMAT.md §2.2.
var (
	// ErrSeededLacksMarker: a seeded log has no {inherited:true} end-seed.
	ErrSeededLacksMarker = errors.New("seeded Session lacks an inherited end-seed marker")
	// ErrUnseededHasMarker: an unseeded log has an {inherited:true} end-seed.
	ErrUnseededHasMarker = errors.New("unseeded Session contains an inherited end-seed marker")
)

// Marker payloads, canonical.
var (
	endSeedData          = json.RawMessage(`{}`)
	inheritedEndSeedData = json.RawMessage(`{"inherited":true}`)
)

// EndSeedMarker returns the session/end-seed marker the Session constructor
// appends after a constructor seed (FORMAT.md §5.4), at seq len(seed) (the first
// live seq). Call it only when a seed is supplied, even an empty one: a fresh
// session without a seed gets no marker.
//
//   - freshFork (a non-restore construction of a seeded header, i.e. a fork
//     child): the marker is always {inherited:true}, even when the copied
//     prefix already ends with an ancestor's marker;
//   - otherwise (resume, replay, unseeded seed): the marker is {} unless the
//     seed's last event already is a session/end-seed, in which case none is
//     due and EndSeedMarker returns false (reopening an untouched session
//     must not grow the log).
//
// time is the marker's time, chosen by the caller: the store never stamps
// events, and workflows must stay deterministic. The recommended value is
// EndSeedTime(seed, now), i.e. the last seed event's time (like the crash
// closers, this keeps a replay byte-identical) and the workflow's
// deterministic clock only for an empty seed.
func EndSeedMarker(seed []Event, freshFork bool, time int64) (Event, bool) {
	e := Event{Type: wire.TypeEndSeed, Seq: int64(len(seed)), Time: time}
	if freshFork {
		e.Data = append(json.RawMessage(nil), inheritedEndSeedData...)
		return e, true
	}
	if len(seed) > 0 && seed[len(seed)-1].Type == wire.TypeEndSeed {
		return Event{}, false
	}
	e.Data = append(json.RawMessage(nil), endSeedData...)
	return e, true
}

// EndSeedTime returns the time to give an end-seed marker after seed: the
// time of the seed's last event, or now when the seed is empty.
func EndSeedTime(seed []Event, now int64) int64 {
	if len(seed) == 0 {
		return now
	}
	return seed[len(seed)-1].Time
}

// IsInheritedMarker reports whether e is a session/end-seed event whose
// data.inherited is true. A session/end-seed whose data cannot be read (not
// an object, inherited not a boolean) is an error.
func (e Event) IsInheritedMarker() (bool, error) {
	if e.Type != wire.TypeEndSeed {
		return false, nil
	}
	p, err := e.EndSeed()
	if err != nil {
		return false, err
	}
	return p.Inherited, nil
}

// lastInheritedMarker finds the last tagged marker of events.
func lastInheritedMarker(events []Event) (seq int64, found bool, err error) {
	for i := len(events) - 1; i >= 0; i-- {
		tagged, err := events[i].IsInheritedMarker()
		if err != nil {
			return 0, false, err
		}
		if tagged {
			return events[i].Seq, true, nil
		}
	}
	return 0, false, nil
}

// InheritedEventCount derives the inherited event count of a stored log
// (FORMAT.md §2.2): the seq of the LAST session/end-seed whose data.inherited is
// true (the number of events before it), or 0 when there is none. Markers
// are inspected from the end; a malformed end-seed payload met on the way is
// an error.
func InheritedEventCount(events []Event) (int64, error) {
	seq, _, err := lastInheritedMarker(events)
	return seq, err
}

// ValidateInheritedMarker checks that a stored log agrees with its header:
// a seeded header needs an {inherited:true} end-seed (ErrSeededLacksMarker),
// an unseeded one must have none (ErrUnseededHasMarker).
func ValidateInheritedMarker(h wire.Header, events []Event) error {
	_, found, err := lastInheritedMarker(events)
	if err != nil {
		return err
	}
	switch {
	case h.IsSeeded && !found:
		return ErrSeededLacksMarker
	case !h.IsSeeded && found:
		return ErrUnseededHasMarker
	}
	return nil
}
