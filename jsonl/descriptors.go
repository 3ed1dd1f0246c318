package jsonl

import (
	"container/list"
	"sync"
)

// descriptorBudget bounds the descriptors that write handles keep open
// between mutations (their lease and their log, docs/DECISIONS.md D6).
// Handles holding descriptors are kept in least-recently-used order; before
// a handle opens one, handles that are not in an operation give theirs
// back, oldest first, until the new one fits (docs/DECISIONS.md D52). A
// handle that gave its descriptors back reopens them on its next mutation,
// through the full lease check.
type descriptorBudget struct {
	limit int // 0: no limit

	mu   sync.Mutex
	open int
	lru  list.List // *handleState, most recently used at the front
}

// roundVictims is how many idle handles one round of makeRoom tries.
const roundVictims = 8

// OpenDescriptors reports how many descriptors the store's write handles
// keep open between mutations (leases and logs), and the configured limit
// (0 when unlimited).
func (s *Store) OpenDescriptors() (open, limit int) {
	s.fds.mu.Lock()
	defer s.fds.mu.Unlock()
	return s.fds.open, s.fds.limit
}

// fdOpened records that st keeps one more descriptor and makes it the most
// recently used. The caller holds st's session slot.
func (s *Store) fdOpened(st *handleState) {
	b := &s.fds
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open++
	st.held++
	if st.elem == nil {
		st.elem = b.lru.PushFront(st)
	} else {
		b.lru.MoveToFront(st.elem)
	}
}

// fdClosed records that st closed one of its kept descriptors.
func (s *Store) fdClosed(st *handleState) {
	b := &s.fds
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open--
	st.held--
	if st.held == 0 && st.elem != nil {
		b.lru.Remove(st.elem)
		st.elem = nil
	}
}

// fdUsed makes st the most recently used holder.
func (s *Store) fdUsed(st *handleState) {
	b := &s.fds
	b.mu.Lock()
	defer b.mu.Unlock()
	if st.elem != nil {
		b.lru.MoveToFront(st.elem)
	}
}

// makeRoom releases the descriptors of idle handles, least recently used
// first, until one more descriptor fits in the limit. A handle is idle when
// its session's slot is free: it is taken without waiting, so a handle in
// an operation is never touched and makeRoom never blocks. When every
// holder is in an operation the new descriptor is opened anyway; the limit
// is then exceeded by at most the descriptors of the operations in flight,
// and the excess is given back as they end (releaseExcess). The caller
// holds st's session slot.
func (s *Store) makeRoom(st *handleState) { s.shrink(st, 1) }

// releaseExcess gives back idle handles' descriptors while more than the
// limit are open, after an operation that opened its own over the limit.
func (s *Store) releaseExcess(st *handleState) { s.shrink(st, 0) }

// shrink releases idle handles' descriptors, least recently used first and
// never st's, until need more descriptors fit in the limit or no idle
// holder is left.
func (s *Store) shrink(st *handleState, need int) {
	b := &s.fds
	if b.limit <= 0 {
		return
	}
	fits := func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.open+need <= b.limit
	}
	var skip map[*handleState]bool
	for !fits() {
		b.mu.Lock()
		victims := make([]*handleState, 0, roundVictims)
		for e := b.lru.Back(); e != nil && len(victims) < roundVictims; e = e.Prev() {
			if v := e.Value.(*handleState); v != st && !skip[v] {
				victims = append(victims, v)
			}
		}
		b.mu.Unlock()
		if len(victims) == 0 {
			return
		}
		for _, v := range victims {
			if !s.releaseIdle(v) {
				if skip == nil {
					skip = map[*handleState]bool{}
				}
				skip[v] = true
			} else if fits() {
				return
			}
		}
	}
}

// releaseIdle closes v's kept descriptors when its session's slot is free,
// and reports whether it did.
func (s *Store) releaseIdle(v *handleState) bool {
	s.mu.Lock()
	ch := s.slots[v.ref.SessionID]
	s.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case ch <- struct{}{}:
	default:
		return false
	}
	defer func() { <-ch }()
	s.releaseFiles(v)
	return true
}

// releaseLog closes st's kept log descriptor.
func (s *Store) releaseLog(st *handleState) {
	if st.logf != nil {
		_ = st.logf.Close()
		st.logf = nil
		s.fdClosed(st)
	}
}

// releaseLeaseFile closes st's kept lease descriptor (the lease itself stays).
func (s *Store) releaseLeaseFile(st *handleState) {
	if st.lease != nil {
		_ = st.lease.Close()
		st.lease, st.leaseFI = nil, nil
		s.fdClosed(st)
	}
}

// releaseFiles closes every descriptor st keeps.
func (s *Store) releaseFiles(st *handleState) {
	s.releaseLog(st)
	s.releaseLeaseFile(st)
}
