package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

func observeAll(t *testing.T, events []Event) (*TurnScanner, *Event) {
	t.Helper()
	var s TurnScanner
	var last *Event
	for i := range events {
		require.NoError(t, s.Observe(events[i]))
		last = &events[i]
	}
	return &s, last
}

func TestCrashRepairClosesTurnThenMarks(t *testing.T) {
	events := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeStepStart, 1, `{"turn":1,"step":1}`),
	}
	s, last := observeAll(t, events)
	batch, closers, err := s.CrashRepair(last, 99)
	require.NoError(t, err)
	require.Equal(t, 2, closers)
	assert.Equal(t, []string{
		`{"type":"step/end","seq":2,"time":1001,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":3,"time":1001,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`,
		`{"type":"session/end-seed","seq":4,"time":1001,"data":{}}`,
	}, lines(t, batch))
}

func TestCrashRepairBalancedLogGetsOnlyTheMarker(t *testing.T) {
	events := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeTurnEnd, 1, `{"turn":1,"reason":{"kind":"completed"}}`),
	}
	s, last := observeAll(t, events)
	batch, closers, err := s.CrashRepair(last, 99)
	require.NoError(t, err)
	require.Zero(t, closers)
	assert.Equal(t, []string{`{"type":"session/end-seed","seq":2,"time":1001,"data":{}}`}, lines(t, batch))
}

func TestCrashRepairEmptyLogMarkerTakesNow(t *testing.T) {
	var s TurnScanner
	batch, closers, err := s.CrashRepair(nil, 99)
	require.NoError(t, err)
	require.Zero(t, closers)
	assert.Equal(t, []string{`{"type":"session/end-seed","seq":0,"time":99,"data":{}}`}, lines(t, batch))
}

func TestCrashRepairNothingDueAfterMarker(t *testing.T) {
	events := []Event{mk(wire.TypeEndSeed, 0, `{}`)}
	s, last := observeAll(t, events)
	batch, closers, err := s.CrashRepair(last, 99)
	require.NoError(t, err)
	assert.Zero(t, closers)
	assert.Empty(t, batch)
}
