package session

import (
	"crypto/sha256"
	"encoding/hex"
)

// Print identifies an event by everything but its seq: the hex of the
// first 16 bytes of the SHA-256 of its canonical form (FORMAT.md §1.4)
// with seq 0 and a replace surface operation in the v3 spelling. Two
// events have the same print when they are the same event stored at
// different seqs; the store reports, and the session workflow keeps, the
// prints of stored events no append has claimed yet (an append at the
// end whose store ran in a workflow task attempt that left no history),
// small enough for a marker.
func Print(e Event) (string, error) {
	key, err := PrintKey(e)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:16]), nil
}

// PrintKey is the canonical form Print hashes: the event's encoding with
// seq 0, its data canonical, a replace surface operation in the v3
// spelling. Two events have the same key when they differ at most in seq.
func PrintKey(e Event) ([]byte, error) {
	snap, err := SnapshotBatch([]Event{e})
	if err != nil {
		return nil, err
	}
	c := snap[0]
	c.Seq = 0
	if c.SurfaceOp != nil {
		c.SurfaceOp.Spelling = SpellingV3
	}
	return c.MarshalJSON()
}
