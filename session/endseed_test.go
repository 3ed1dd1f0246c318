package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

func TestEndSeedMarkerResume(t *testing.T) {
	seed := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeTurnEnd, 1, `{"turn":1,"reason":{"kind":"completed"}}`),
	}
	m, ok := EndSeedMarker(seed, false, EndSeedTime(seed, 99))
	require.True(t, ok)
	assert.Equal(t, `{"type":"session/end-seed","seq":2,"time":1001,"data":{}}`, encodeLine(t, m))
	require.NoError(t, m.Validate())

	// Idempotence: a seed that already ends with a marker gets none.
	seed = append(seed, m)
	_, ok = EndSeedMarker(seed, false, 5)
	assert.False(t, ok)
	// An inherited marker at the end counts too.
	_, ok = EndSeedMarker([]Event{mk(wire.TypeEndSeed, 0, `{"inherited":true}`)}, false, 5)
	assert.False(t, ok)

	// An empty seed (supplied) gets a marker at seq 0; EndSeedTime falls back.
	m, ok = EndSeedMarker(nil, false, EndSeedTime(nil, 42))
	require.True(t, ok)
	assert.Equal(t, `{"type":"session/end-seed","seq":0,"time":42,"data":{}}`, encodeLine(t, m))
}

func TestEndSeedMarkerFork(t *testing.T) {
	prefix := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeTurnEnd, 1, `{"turn":1,"reason":{"kind":"completed"}}`),
		mk(wire.TypeEndSeed, 2, `{"inherited":true}`), // the ancestor's marker
	}
	m, ok := EndSeedMarker(prefix, true, 7)
	require.True(t, ok)
	assert.Equal(t, `{"type":"session/end-seed","seq":3,"time":7,"data":{"inherited":true}}`, encodeLine(t, m))

	m, ok = EndSeedMarker(nil, true, 7)
	require.True(t, ok)
	assert.Equal(t, `{"type":"session/end-seed","seq":0,"time":7,"data":{"inherited":true}}`, encodeLine(t, m))

	// The marker data is never shared between calls.
	m.Data[1] = 'X'
	m2, _ := EndSeedMarker(nil, true, 7)
	assert.Equal(t, `{"inherited":true}`, string(m2.Data))
}

func TestInheritedEventCount(t *testing.T) {
	n, err := InheritedEventCount(nil)
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)

	log := []Event{
		mk(wire.TypeTurnStart, 0, `{"turn":1}`),
		mk(wire.TypeEndSeed, 1, `{"inherited":true}`), // grandparent cut
		mk(wire.TypeTurnEnd, 2, `{"turn":1,"reason":{"kind":"completed"}}`),
		mk(wire.TypeEndSeed, 3, `{"inherited":true}`), // parent cut: the last tagged marker
		mk(wire.TypeEndSeed, 4, `{}`),                 // a resume marker does not count
		mk(wire.TypeTurnStart, 5, `{"turn":2}`),
	}
	n, err = InheritedEventCount(log)
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)

	n, err = InheritedEventCount(log[:2])
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)

	n, err = InheritedEventCount([]Event{mk(wire.TypeEndSeed, 0, `{}`)})
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)

	_, err = InheritedEventCount([]Event{mk(wire.TypeEndSeed, 0, `{"inherited":1}`)})
	assert.Error(t, err)

	tagged, err := log[3].IsInheritedMarker()
	require.NoError(t, err)
	assert.True(t, tagged)
	tagged, err = log[0].IsInheritedMarker()
	require.NoError(t, err)
	assert.False(t, tagged)
}

func TestValidateInheritedMarker(t *testing.T) {
	seeded := wire.Header{Version: wire.FormatVersion, ID: "s", IsSeeded: true}
	unseeded := wire.Header{Version: wire.FormatVersion, ID: "s"}
	tagged := []Event{mk(wire.TypeEndSeed, 0, `{"inherited":true}`)}
	plain := []Event{mk(wire.TypeEndSeed, 0, `{}`)}

	assert.NoError(t, ValidateInheritedMarker(seeded, tagged))
	assert.NoError(t, ValidateInheritedMarker(unseeded, plain))
	assert.NoError(t, ValidateInheritedMarker(unseeded, nil))

	err := ValidateInheritedMarker(seeded, plain)
	assert.EqualError(t, err, "seeded Session lacks an inherited end-seed marker")
	assert.ErrorIs(t, err, ErrSeededLacksMarker)
	err = ValidateInheritedMarker(unseeded, tagged)
	assert.EqualError(t, err, "unseeded Session contains an inherited end-seed marker")
	assert.ErrorIs(t, err, ErrUnseededHasMarker)

	assert.Error(t, ValidateInheritedMarker(unseeded, []Event{mk(wire.TypeEndSeed, 0, `{"inherited":[]}`)}))
}
