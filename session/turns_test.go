package session

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

func TestTurnNumbering(t *testing.T) {
	assert.Equal(t, int64(0), LastTurn(nil))
	assert.Equal(t, int64(1), NextTurn(nil))
	assert.Equal(t, int64(0), NextSeq(nil))

	log := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeTurnEnd, 1, `{"turn":1,"reason":{"kind":"completed"}}`),
		mk(wire.TypeTurnStart, 2, `{"turn":2}`),
		mk(wire.TypeStepStart, 3, `{"turn":2,"step":1}`),
		mk(wire.TypeStepEnd, 4, `{"turn":2,"step":1}`),
		mk(wire.TypeTurnEnd, 5, `{"turn":2,"reason":{"kind":"completed"}}`),
		mk(wire.TypeEndSeed, 6, `{}`),
	}
	assert.Equal(t, int64(2), LastTurn(log))
	assert.Equal(t, int64(3), NextTurn(log))
	assert.Equal(t, int64(7), NextSeq(log))
	assert.Equal(t, int64(1), LastTurn(log[:2]))

	// A malformed turn/start is skipped.
	bad := append(append([]Event(nil), log...), mk(wire.TypeTurnStart, 7, `{}`))
	assert.Equal(t, int64(2), LastTurn(bad))
}

func TestCheckContiguous(t *testing.T) {
	batch := []Event{mk("x", 5, `{}`), mk("x", 6, `{}`), mk("x", 8, `{}`)}
	require.NoError(t, CheckContiguous("s", 5, batch[:2]))
	require.NoError(t, CheckContiguous("s", 5, nil))

	err := CheckContiguous("s-1", 5, batch)
	assert.EqualError(t, err, `append seq mismatch for "s-1": expected 7 at index 2, got 8`)
	var sm *SeqMismatchError
	require.True(t, errors.As(err, &sm))
	assert.Equal(t, SeqMismatchError{SessionID: "s-1", Expected: 7, Index: 2, Got: 8}, *sm)

	// A re-append of stored seqs.
	err = CheckContiguous("s", 7, batch[:1])
	assert.EqualError(t, err, `append seq mismatch for "s": expected 7 at index 0, got 5`)
	// The id is written verbatim.
	err = CheckContiguous(`a"b/é`, 0, batch[:1])
	assert.EqualError(t, err, `append seq mismatch for "a"b/é": expected 0 at index 0, got 5`)

	assert.Error(t, CheckContiguous("s", -1, batch))
}
