package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/wire"
)

func mustRouter(t *testing.T, shards ...Shard) *Router {
	t.Helper()
	r, err := NewRouter(shards...)
	require.NoError(t, err)
	return r
}

// The expected shards were computed independently of this package (SHA-256
// of name, 0, id; highest first 8 bytes big-endian wins), so a change of the
// hash, of the byte layout or of the comparison shows here.
func TestRouterRoutesLiteralIDs(t *testing.T) {
	two := mustRouter(t, Shard{"a", "qa"}, Shard{"b", "qb"})
	three := mustRouter(t, Shard{"a", "qa"}, Shard{"b", "qb"}, Shard{"c", "qc"})
	named := mustRouter(t, Shard{"east", "q-east"}, Shard{"west", "q-west"}, Shard{"north", "q-north"})
	for _, tc := range []struct{ id, two, three, named string }{
		{"sess-1", "b", "b", "north"},
		{"sess-2", "b", "c", "north"},
		{"sess-3", "a", "c", "west"},
		{"alpha", "a", "a", "north"},
		{"beta", "b", "b", "east"},
		{"01HZX3K9Q2", "a", "a", "west"},
		{"session/with/slash", "a", "a", "east"},
		{"日本", "a", "a", "east"},
	} {
		require.Equal(t, tc.two, two.Route(tc.id).Name, "two shards, id %q", tc.id)
		require.Equal(t, tc.three, three.Route(tc.id).Name, "three shards, id %q", tc.id)
		require.Equal(t, tc.named, named.Route(tc.id).Name, "named shards, id %q", tc.id)
	}
	require.Equal(t, Shard{Name: "north", TaskQueue: "q-north"}, named.Route("sess-1"))
}

// The order of the configuration does not change any route.
func TestRouterIgnoresShardOrder(t *testing.T) {
	r1 := mustRouter(t, Shard{"a", "qa"}, Shard{"b", "qb"}, Shard{"c", "qc"})
	r2 := mustRouter(t, Shard{"c", "qc"}, Shard{"a", "qa"}, Shard{"b", "qb"})
	for i := range 2000 {
		id := fmt.Sprintf("id-%d", i)
		require.Equal(t, r1.Route(id), r2.Route(id), id)
	}
}

// Adding a shard moves only ids onto the new shard, never between the old
// ones, and about 1/(n+1) of them; removing it moves them back.
func TestRouterStableWhenAShardIsAdded(t *testing.T) {
	before := mustRouter(t, Shard{"a", "qa"}, Shard{"b", "qb"})
	after := mustRouter(t, Shard{"a", "qa"}, Shard{"b", "qb"}, Shard{"c", "qc"})
	const n = 10000
	moved := 0
	for i := range n {
		id := fmt.Sprintf("id-%d", i)
		b, a := before.Route(id), after.Route(id)
		if a != b {
			require.Equal(t, "c", a.Name, "id %q moved from %s to %s, not to the new shard", id, b.Name, a.Name)
			moved++
		}
	}
	// Computed independently: 3352 of these 10000 ids score highest on c.
	require.Equal(t, 3352, moved)
}

// Ids spread evenly: every shard of four gets within 5% of a quarter.
func TestRouterSpread(t *testing.T) {
	r := mustRouter(t, Shard{"s0", "q0"}, Shard{"s1", "q1"}, Shard{"s2", "q2"}, Shard{"s3", "q3"})
	counts := map[string]int{}
	const n = 10000
	for i := range n {
		counts[r.Route(fmt.Sprintf("id-%d", i)).Name]++
	}
	// Computed independently of this package.
	require.Equal(t, map[string]int{"s0": 2514, "s1": 2478, "s2": 2502, "s3": 2506}, counts)
	for name, c := range counts {
		require.InDelta(t, n/4, c, n/4*0.05, "shard %s", name)
	}
}

func TestRouterRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shards []Shard
		msg    string
	}{
		{"none", nil, "invalid shard configuration: no shard"},
		{"no name", []Shard{{"", "q"}}, `invalid shard configuration: shard "=q" has no name`},
		{"no queue", []Shard{{"a", ""}}, `invalid shard configuration: shard "a" has no task queue`},
		{"comma", []Shard{{"a,b", "q"}}, `invalid shard configuration: shard name "a,b" holds '=', ',' or white space`},
		{"twice", []Shard{{"a", "q1"}, {"a", "q2"}}, `invalid shard configuration: shard "a" is given twice`},
		{"shared queue", []Shard{{"a", "q"}, {"b", "q"}}, `invalid shard configuration: shards "a" and "b" share task queue "q"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRouter(tc.shards...)
			require.ErrorIs(t, err, ErrShardConfig)
			require.EqualError(t, err, tc.msg)
		})
	}
}

func TestRouterParseShard(t *testing.T) {
	s, err := ParseShard("east=sessionflow-east")
	require.NoError(t, err)
	require.Equal(t, Shard{Name: "east", TaskQueue: "sessionflow-east"}, s)
	s, err = ParseShard("east=q=1")
	require.NoError(t, err)
	require.Equal(t, Shard{Name: "east", TaskQueue: "q=1"}, s)
	for in, msg := range map[string]string{
		"east":   `invalid shard configuration: shard "east" is not name=task-queue`,
		"=q":     `invalid shard configuration: shard "=q" has no name`,
		"east=":  `invalid shard configuration: shard "east" has no task queue`,
		"e st=q": `invalid shard configuration: shard name "e st" holds '=', ',' or white space`,
	} {
		_, err := ParseShard(in)
		require.ErrorIs(t, err, ErrShardConfig, in)
		require.EqualError(t, err, msg, in)
	}
}

func TestRouterShardOfOverride(t *testing.T) {
	r := mustRouter(t, Shard{"a", "qa"}, Shard{"b", "qb"})
	c := New(nil, Options{Router: r})
	s, err := c.ShardOf("sess-1")
	require.NoError(t, err)
	require.Equal(t, Shard{"b", "qb"}, s)
	s, err = c.ShardOf("sess-1", OnShard("a"))
	require.NoError(t, err)
	require.Equal(t, Shard{"a", "qa"}, s)

	_, err = c.ShardOf("sess-1", OnShard("z"))
	require.ErrorIs(t, err, ErrUnknownShard)
	require.EqualError(t, err, `shard "z" is not configured (shards: a, b)`)
	var ce *Error
	require.True(t, errors.As(err, &ce))
	require.Equal(t, "UnknownShard", ce.Type)

	plain := New(nil, Options{TaskQueue: "tq"})
	s, err = plain.ShardOf("sess-1")
	require.NoError(t, err)
	require.Equal(t, Shard{"tq", "tq"}, s)
	_, err = plain.ShardOf("sess-1", OnShard("other"))
	require.ErrorIs(t, err, ErrUnknownShard)
}

// Create, Resume and LoopStart start their workflow on the routed task
// queue, or on the override's; an unknown override starts nothing.
func TestRouterStartsOnTheShardQueue(t *testing.T) {
	r := mustRouter(t, Shard{"a", "qa"}, Shard{"b", "qb"})
	var queues []string
	f := &fakeTemporal{execute: func(opts temporalclient.StartWorkflowOptions, _ any, _ []any) (temporalclient.WorkflowRun, error) {
		queues = append(queues, opts.TaskQueue)
		return nil, errors.New("no server in this test")
	}}
	c := New(f, Options{Router: r})
	ctx := context.Background()

	_, _ = c.Create(ctx, wire.CreateSessionRequest{SessionID: "sess-1"})
	_, _ = c.Create(ctx, wire.CreateSessionRequest{SessionID: "sess-3"})
	_, _ = c.Resume(ctx, "sess-1", wire.ResumeSessionRequest{}, OnShard("a"))
	_, _ = c.LoopStart(ctx, "alpha", wire.SessionLoopInput{})
	require.Equal(t, []string{"qb", "qa", "qa", "qa"}, queues)

	_, err := c.Create(ctx, wire.CreateSessionRequest{SessionID: "sess-2"}, OnShard("nope"))
	require.ErrorIs(t, err, ErrUnknownShard)
	_, err = c.LoopStart(ctx, "alpha", wire.SessionLoopInput{}, OnShard("nope"))
	require.ErrorIs(t, err, ErrUnknownShard)
	require.Len(t, queues, 4, "a refused override starts no workflow")
}
