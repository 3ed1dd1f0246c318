package jsonl_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/crashfs"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// plSeeds is how many seeded mixed power losses TestPowerLossAtEveryOperation
// tries at each crash point, besides losing and keeping every volatile
// change. Raise it for an exhaustive run.
var plSeeds = flag.Int("powerloss.seeds", 1, "mixed power-loss seeds per crash point in TestPowerLossAtEveryOperation")

// plAll makes TestPowerLossAtEveryOperation crash at every operation index.
// Without it, a crash right after an operation that changes nothing (a
// stat, a read, a lock, a close, an open that creates nothing) is skipped
// unless a step starts there: it leaves the same files and the same
// acknowledgements as the crash one operation earlier.
var plAll = flag.Bool("powerloss.all", false, "crash at every operation index in TestPowerLossAtEveryOperation, not only after changes and at step starts")

// Sessions and handles of the power-loss scenario.
const (
	plA, plB          = "pl-a", "pl-b"
	plCwd             = "/work/powerloss"
	plCreator         = "a-create"
	plResumer         = "a-resume"
	plBCreator        = "b-create"
	plDeletePrefix    = "delete/"
	plStoreDirName    = "store"
	plPlantedRaw      = `{"type":"system/message","seq":7,"ti`
	plFirstAppend     = 3
	plAckedBeforeTorn = 7
)

// plNow is the scenario's fixed clock: the store then makes the same
// operations in every run (summary refreshes and revocation pruning are
// time-based).
var plNow = time.UnixMilli(1_700_000_000_000)

// plModel is what the scenario has had acknowledged.
type plModel struct {
	aExists bool   // A's create was acknowledged
	aAcked  int    // events of A acknowledged
	aOwner  string // the handle A's lease names
	aClosed bool   // plCreator's close was acknowledged
	b       int    // B: 0 none, 1 created, 2 flushed, 3 closed, 4 deleted
}

// plStep is one operation of the scenario.
type plStep struct {
	name  string
	run   func(ctx context.Context, r *plRun) error
	apply func(m *plModel) // its effect once acknowledged
}

// plRun is one run of the scenario over a crashfs.
type plRun struct {
	tb     testing.TB
	fsys   *crashfs.FS
	comp   jsonl.Compression
	root   string // the store root
	s      *jsonl.Store
	ha, hb *jsonl.Handle
	starts []int           // the operation index at which each step started
	want   []session.Event // A's events in seq order, as written or planted
	// visible is how many events of want a reader sees once the torn tail
	// is planted: the acknowledged ones, plus for zstd the complete records
	// of the torn frame.
	visible int
}

func plHeader(id string) wire.Header {
	return wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: 1_700_000_000_000, Cwd: plCwd}
}

func plOpenStore(tb testing.TB, root string, comp jsonl.Compression, fsys jsonl.FS) *jsonl.Store {
	tb.Helper()
	s, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: comp, FS: fsys, Logger: durQuiet, Now: func() time.Time { return plNow }})
	require.NoError(tb, err)
	return s
}

// plLogPath is where A's log lives.
func plLogPath(tb testing.TB, root string, comp jsonl.Compression) string {
	tb.Helper()
	project, err := jsonl.ProjectKey(plCwd)
	require.NoError(tb, err)
	name := "session.v3.jsonl"
	if comp == jsonl.CompressionZstd {
		name += ".zstd"
	}
	return filepath.Join(root, project, plA, name)
}

// plSteps is the scenario: A is created, materialized by its first append,
// appended to and closed; a torn tail is left on its log as an earlier crash
// would; A is opened for writing by a resume, whose first append repairs
// the tail, and appended to, and stays open; B is created, flushed (a
// header-only log), closed and deleted.
func plSteps(want []session.Event, visible int) []plStep {
	appendA := func(h **jsonl.Handle, from, to int) func(ctx context.Context, r *plRun) error {
		return func(ctx context.Context, r *plRun) error { return (*h).Append(ctx, want[from:to]) }
	}
	return []plStep{
		{"open the store", func(_ context.Context, r *plRun) (err error) {
			r.s, err = jsonl.NewStore(jsonl.Options{Root: r.root, Compression: r.comp, FS: r.fsys, Logger: durQuiet, Now: func() time.Time { return plNow }})
			return err
		}, func(*plModel) {}},
		{"create A", func(ctx context.Context, r *plRun) (err error) {
			r.ha, err = r.s.Create(ctx, plHeader(plA), jsonl.CreateOptions{HandleID: plCreator})
			return err
		}, func(m *plModel) { m.aExists, m.aOwner = true, plCreator }},
		{"first append A", func(ctx context.Context, r *plRun) error {
			return r.ha.Append(ctx, want[:plFirstAppend])
		}, func(m *plModel) { m.aAcked = plFirstAppend }},
		{"append A", func(ctx context.Context, r *plRun) error {
			return r.ha.Append(ctx, want[plFirstAppend:5])
		}, func(m *plModel) { m.aAcked = 5 }},
		{"append A again", func(ctx context.Context, r *plRun) error {
			return r.ha.Append(ctx, want[5:plAckedBeforeTorn])
		}, func(m *plModel) { m.aAcked = plAckedBeforeTorn }},
		{"close A", func(ctx context.Context, r *plRun) error {
			return r.ha.Close(ctx)
		}, func(m *plModel) { m.aOwner, m.aClosed = "", true }},
		{"leave a torn tail on A", func(_ context.Context, r *plRun) error {
			return r.plantTornTail()
		}, func(*plModel) {}},
		{"open A for writing", func(ctx context.Context, r *plRun) (err error) {
			r.ha, err = r.s.Open(ctx, plA, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: plResumer})
			if err != nil {
				return err
			}
			got, err := r.ha.Read(ctx, 0, -1)
			if err != nil {
				return err
			}
			if !slices.Equal(durLines(r.tb, want[:visible]), durLines(r.tb, got)) {
				return fmt.Errorf("the resume reads %d events, want the %d visible ones", len(got), visible)
			}
			return nil
		}, func(m *plModel) { m.aOwner = plResumer }},
		{"repair A by appending", func(ctx context.Context, r *plRun) error {
			return appendA(&r.ha, visible, visible+2)(ctx, r)
		}, func(m *plModel) { m.aAcked = visible + 2 }},
		{"append A after the repair", func(ctx context.Context, r *plRun) error {
			return appendA(&r.ha, visible+2, visible+4)(ctx, r)
		}, func(m *plModel) { m.aAcked = visible + 4 }},
		{"create B", func(ctx context.Context, r *plRun) (err error) {
			r.hb, err = r.s.Create(ctx, plHeader(plB), jsonl.CreateOptions{HandleID: plBCreator})
			return err
		}, func(m *plModel) { m.b = 1 }},
		{"flush B", func(ctx context.Context, r *plRun) error { return r.hb.Flush(ctx) }, func(m *plModel) { m.b = 2 }},
		{"close B", func(ctx context.Context, r *plRun) error { return r.hb.Close(ctx) }, func(m *plModel) { m.b = 3 }},
		{"delete B", func(ctx context.Context, r *plRun) error { return r.s.Delete(ctx, plB) }, func(m *plModel) { m.b = 4 }},
	}
}

// plZstdEncoder writes the planted frame independently of the store.
var plZstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))

// plantTornTail leaves on A's log what a crash in the middle of an append
// leaves: a partial line (raw), or a frame whose checksum never arrived but
// whose records are complete (zstd). It goes through the FS, fsynced, like
// any other write of the scenario.
func (r *plRun) plantTornTail() error {
	tail := []byte(plPlantedRaw)
	if r.comp == jsonl.CompressionZstd {
		var body []byte
		for _, l := range durLines(r.tb, r.want[plAckedBeforeTorn:r.visible]) {
			body = append(append(body, l...), '\n')
		}
		frame := plZstdEncoder.EncodeAll(body, nil)
		tail = frame[:len(frame)-4]
	}
	f, err := r.fsys.OpenFile(plLogPath(r.tb, r.root, r.comp), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(tail)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// plScenario builds a run's expected events: raw logs lose the planted
// fragment, zstd logs recover its two records.
func plScenario(tb testing.TB, comp jsonl.Compression) ([]session.Event, int) {
	visible := plAckedBeforeTorn
	if comp == jsonl.CompressionZstd {
		visible += 2
	}
	return durSeqEvents(tb, 0, int64(visible+4)), visible
}

// run executes the steps until one fails; it returns the index of the
// failed step (len(steps) when all succeeded) and its error.
func (r *plRun) run(steps []plStep) (int, error) {
	ctx := context.Background()
	for i, st := range steps {
		r.starts = append(r.starts, r.fsys.Count())
		if err := st.run(ctx, r); err != nil {
			return i, err
		}
	}
	return len(steps), nil
}

// plNewRun prepares a scenario run in a fresh directory under work.
func plNewRun(tb testing.TB, work string, comp jsonl.Compression, want []session.Event, visible int) *plRun {
	tb.Helper()
	require.NoError(tb, os.RemoveAll(work))
	require.NoError(tb, os.MkdirAll(work, 0o700))
	fsys, err := crashfs.New(work)
	require.NoError(tb, err)
	return &plRun{tb: tb, fsys: fsys, comp: comp, root: filepath.Join(work, plStoreDirName), want: want, visible: visible}
}

// TestPowerLossAtEveryOperation runs the scenario of plSteps once to count
// its filesystem operations, then once per operation index k with the
// machine crashing at operation k, and for each crash lets a power loss
// keep what fsync covered and lose (or keep, or tear) the rest. A fresh
// store on what survived must show every acknowledged event, contiguous,
// with nothing unacknowledged breaking the scan rules, and no lease may
// block the next owner: its owner can continue or close, a stray one is
// forfeited with ForceUnlock, and then a new owner opens the session.
func TestPowerLossAtEveryOperation(t *testing.T) {
	for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
		t.Run(string(comp), func(t *testing.T) {
			t.Parallel()
			want, visible := plScenario(t, comp)
			steps := plSteps(want, visible)
			work := filepath.Join(durScratchDir(t), "machine")

			clean := plNewRun(t, work, comp, want, visible)
			done, err := clean.run(steps)
			require.NoError(t, err, "the scenario fails without a crash at step %q", stepName(steps, done))
			total := clean.fsys.Count()
			require.Greater(t, total, 100, "the scenario should make a few hundred operations")

			policies := func(k int) []crashfs.Policy {
				ps := []crashfs.Policy{{Mode: crashfs.LoseVolatile}, {Mode: crashfs.KeepVolatile}}
				for i := 0; i < *plSeeds; i++ {
					ps = append(ps, crashfs.Policy{Mode: crashfs.Mixed, Seed: uint64(k*1000 + i)})
				}
				return ps
			}
			recs := clean.fsys.Records()
			points := 0
			for k := 0; k <= total; k++ {
				if !*plAll && k > 0 && k < total && !recs[k-1].Changes && !slices.Contains(clean.starts, k) {
					continue
				}
				points++
				for _, p := range policies(k) {
					plCrashAndCheck(t, work, comp, want, visible, steps, k, p)
				}
			}
			t.Logf("%d operations, %d crash points, each under %d power-loss policies", total, points, len(policies(0)))
		})
	}
}

func stepName(steps []plStep, i int) string {
	if i < len(steps) {
		return steps[i].name
	}
	return "none"
}

// plCrashAndCheck runs the scenario with the machine crashing at operation
// k, applies the power-loss policy and checks the survivors.
func plCrashAndCheck(t *testing.T, work string, comp jsonl.Compression, want []session.Event, visible int, steps []plStep, k int, p crashfs.Policy) {
	t.Helper()
	r := plNewRun(t, work, comp, want, visible)
	r.fsys.CrashAt(k)
	failed, err := r.run(steps)
	var op crashfs.Record
	if recs := r.fsys.Records(); k < len(recs) {
		op = recs[k]
	}
	where := fmt.Sprintf("crash at operation %d (%s %s), first step to fail %q, power loss %s", k, op.Op, op.Path, stepName(steps, failed), p)
	if err != nil {
		require.True(t, r.fsys.Crashed(), "%s: the step failed without a crash: %v", where, err)
	}
	var before plModel
	for _, st := range steps[:failed] {
		st.apply(&before)
	}
	after := before
	if failed < len(steps) {
		steps[failed].apply(&after)
	}
	report, perr := r.fsys.PowerLoss(p)
	require.NoError(t, perr, where)
	where += "\nvolatile changes:\n  " + strings.Join(report, "\n  ")
	// At every other crash point A's owner is taken to have died with the
	// machine, and the operator forfeits its lease.
	c := &plCheck{t: t, where: where, root: r.root, comp: comp, want: want, before: before, after: after, ownerDied: k%2 == 1}
	if failed < len(steps) {
		c.inflight = steps[failed].name
	}
	s, next := c.store(), c.store()
	c.checkA(s, next)
	c.checkB(s, next)
}

// plCheck verifies what a fresh store finds after a power loss.
type plCheck struct {
	t             *testing.T
	where         string
	root          string
	comp          jsonl.Compression
	want          []session.Event
	before, after plModel
	inflight      string
	ownerDied     bool // A's owner never comes back: ForceUnlock frees A
}

func (c *plCheck) store() *jsonl.Store { return plOpenStore(c.t, c.root, c.comp, nil) }

// readAll opens id for reading on a fresh store; found is false for an
// unknown session.
func (c *plCheck) readAll(s *jsonl.Store, id string) ([]session.Event, bool) {
	ctx := context.Background()
	r, err := s.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	if errors.Is(err, wire.ErrNotFound) {
		return nil, false
	}
	require.NoError(c.t, err, "%s: a read of %s must succeed or find nothing", c.where, id)
	got, err := r.Read(ctx, 0, -1)
	require.NoError(c.t, err, c.where)
	return got, true
}

func (c *plCheck) leaseOf(s *jsonl.Store, id string) string {
	l, err := s.LeaseOf(context.Background(), id)
	require.NoError(c.t, err, c.where)
	if l == nil {
		return ""
	}
	return l.HandleID
}

// checkA checks A on s, a fresh store, lets its lease's owner carry on and
// close, then has a new owner open it on next, another fresh store.
func (c *plCheck) checkA(s, next *jsonl.Store) {
	t, ctx := c.t, context.Background()
	_, err := s.List(ctx)
	require.NoError(t, err, "%s: List after the power loss", c.where)

	got, found := c.readAll(s, plA)
	if c.before.aExists {
		require.True(t, found, "%s: A's acknowledged create was lost", c.where)
	}
	require.GreaterOrEqual(t, len(got), c.before.aAcked, "%s: acknowledged events of A were lost", c.where)
	require.LessOrEqual(t, len(got), len(c.want), c.where)
	durRequireEvents(t, c.want[:len(got)], got, "%s: A's events must be a prefix of what was written", c.where)

	owner := c.leaseOf(s, plA)
	require.Contains(t, []string{c.before.aOwner, c.after.aOwner}, owner, "%s: A's lease", c.where)
	if c.before.aClosed {
		_, err := s.Open(ctx, plA, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: plCreator})
		require.ErrorIs(t, err, wire.ErrHandleRevoked, "%s: the acknowledged close of %s was lost", c.where, plCreator)
	}

	// The lease's owner carries on where it stopped, then closes; or it
	// never comes back and the operator forfeits its lease.
	if owner != "" && c.ownerDied {
		l, err := s.ForceUnlock(ctx, plA)
		require.NoError(t, err, "%s: ForceUnlock", c.where)
		require.NotNil(t, l, c.where)
		require.Equal(t, owner, l.HandleID, c.where)
		require.Empty(t, c.leaseOf(s, plA), "%s: the lease outlived ForceUnlock", c.where)
		_, err = s.Open(ctx, plA, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: owner})
		require.ErrorIs(t, err, wire.ErrHandleRevoked, "%s: the forfeited handle must not come back", c.where)
	} else if owner != "" {
		ref := jsonl.HandleRef{SessionID: plA, HandleID: owner, Access: jsonl.AccessWrite}
		switch {
		case c.inflight == "close A" && owner == plCreator:
		case owner == c.before.aOwner:
			got = c.ownerAppends(s.Attach(ref), got)
		case c.inflight == "create A":
			h, err := s.Create(ctx, plHeader(plA), jsonl.CreateOptions{HandleID: owner})
			require.NoError(t, err, "%s: the retried create", c.where)
			got = c.ownerAppends(h, got)
		case c.inflight == "open A for writing":
			h, err := s.Open(ctx, plA, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: owner})
			require.NoError(t, err, "%s: the retried write open", c.where)
			got = c.ownerAppends(h, got)
		default:
			t.Fatalf("%s: A's lease names %q, which no step left", c.where, owner)
		}
		require.NoError(t, s.CloseHandle(ctx, ref), "%s: the owner's close", c.where)
		require.Empty(t, c.leaseOf(s, plA), "%s: the lease outlived its owner's close", c.where)
	}

	// Then a new owner opens the session and continues it.
	has, err := next.Has(ctx, plA)
	require.NoError(t, err, c.where)
	h, err := next.Open(ctx, plA, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "a-next"})
	if !has {
		require.ErrorIs(t, err, wire.ErrNotFound, "%s: a write open of a session with no log", c.where)
		require.Empty(t, got, c.where)
		return
	}
	require.NoError(t, err, "%s: the next owner cannot open A", c.where)
	got = c.ownerAppends(h, got)
	require.NoError(t, h.Close(ctx), c.where)
	final, found := c.readAll(next, plA)
	require.True(t, found, c.where)
	durRequireEvents(t, got, final, "%s: A after recovery", c.where)
	require.NoError(t, session.CheckContiguous(plA, 0, final), c.where)
}

// ownerAppends has a write handle append one event after what it reads and
// returns the log as it must now read.
func (c *plCheck) ownerAppends(h *jsonl.Handle, got []session.Event) []session.Event {
	ctx := context.Background()
	cur, err := h.Read(ctx, 0, -1)
	require.NoError(c.t, err, "%s: the owner's read", c.where)
	durRequireEvents(c.t, got, cur, "%s: the owner reads what a reader read", c.where)
	ev, err := session.NewEvent(wire.TypeSystemMessage, int64(len(cur)), 9_000, durObj{"text": "after the power loss"})
	require.NoError(c.t, err)
	require.NoError(c.t, h.Append(ctx, []session.Event{ev}), "%s: the owner's append", c.where)
	return append(cur, ev)
}

// checkB checks B on s, recovers and deletes it, and checks on next that it
// is gone.
func (c *plCheck) checkB(s, next *jsonl.Store) {
	t, ctx := c.t, context.Background()
	states := []int{c.before.b, c.after.b}
	has, err := s.Has(ctx, plB)
	require.NoError(t, err, c.where)
	wantHas := map[int]bool{2: true, 3: true}
	require.True(t, has == wantHas[c.before.b] || has == wantHas[c.after.b], "%s: B has a log: %v, B's states %v", c.where, has, states)
	if has {
		got, found := c.readAll(s, plB)
		require.True(t, found, c.where)
		require.Empty(t, got, "%s: B's log holds its header only", c.where)
	}
	owner := c.leaseOf(s, plB)
	leased := func(b int) string {
		if b == 1 || b == 2 {
			return plBCreator
		}
		return ""
	}
	stray := c.inflight == "delete B" && strings.HasPrefix(owner, plDeletePrefix)
	require.True(t, stray || owner == leased(c.before.b) || owner == leased(c.after.b), "%s: B's lease %q, B's states %v", c.where, owner, states)
	if c.before.b >= 3 {
		_, err := s.Open(ctx, plB, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: plBCreator})
		require.ErrorIs(t, err, wire.ErrHandleRevoked, "%s: the acknowledged close of %s was lost", c.where, plBCreator)
	}

	// Recovery: the owner closes (after a retried create when the create
	// was in flight), a stray delete lease is forfeited; then B deletes.
	switch {
	case owner == "":
	case stray:
		l, err := s.ForceUnlock(ctx, plB)
		require.NoError(t, err, c.where)
		require.NotNil(t, l, c.where)
	default:
		if c.inflight == "create B" {
			_, err := s.Create(ctx, plHeader(plB), jsonl.CreateOptions{HandleID: owner})
			require.NoError(t, err, "%s: the retried create of B", c.where)
		}
		require.NoError(t, s.CloseHandle(ctx, jsonl.HandleRef{SessionID: plB, HandleID: owner, Access: jsonl.AccessWrite}), c.where)
	}
	require.Empty(t, c.leaseOf(s, plB), "%s: B's lease after recovery", c.where)
	require.NoError(t, s.Delete(ctx, plB), "%s: B's delete after recovery", c.where)
	has, err = next.Has(ctx, plB)
	require.NoError(t, err, c.where)
	require.False(t, has, c.where)
	require.Empty(t, c.leaseOf(next, plB), c.where)
	_, found := c.readAll(next, plB)
	require.False(t, found, "%s: B is gone after its delete", c.where)
	snaps, err := next.List(ctx)
	require.NoError(t, err, c.where)
	for _, sn := range snaps {
		require.NotEqual(t, plB, sn.Header.ID, c.where)
	}
}
