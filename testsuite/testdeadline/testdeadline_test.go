package testdeadline

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeT records what the watchdog reports.
type fakeT struct {
	name     string
	deadline time.Time

	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (f *fakeT) Helper()      {}
func (f *fakeT) Name() string { return f.name }
func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Deadline() (time.Time, bool) {
	return f.deadline, !f.deadline.IsZero()
}
func (f *fakeT) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}
func (f *fakeT) reported() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.errors...)
}

func TestLimitKeepsTheMarginBeforeTheGlobalTimeout(t *testing.T) {
	require.Equal(t, time.Minute, Limit(&fakeT{}, time.Minute), "no -timeout: the limit asked for")
	far := &fakeT{deadline: time.Now().Add(time.Hour)}
	require.Equal(t, time.Minute, Limit(far, time.Minute))
	near := &fakeT{deadline: time.Now().Add(Margin + 20*time.Second)}
	got := Limit(near, time.Minute)
	require.True(t, got <= 20*time.Second && got > 15*time.Second, "the -timeout's end less the margin: %v", got)
	spent := &fakeT{deadline: time.Now().Add(time.Second)}
	require.Equal(t, time.Second, Limit(spent, time.Minute), "a second at least")
}

// A test still waiting at its deadline is failed by name with the state it
// waits on, seen at that moment, and its wait is aborted.
func TestWatchFailsTheTestWithWhatItWaitsOn(t *testing.T) {
	ft := &fakeT{name: "TestStuck"}
	var mu sync.Mutex
	state := "step 1"
	aborted := make(chan struct{})
	Watch(ft, 50*time.Millisecond, func() string {
		mu.Lock()
		defer mu.Unlock()
		return state
	}, func() { close(aborted) })
	mu.Lock()
	state = "step 7 of a turn limited to 2"
	mu.Unlock()
	select {
	case <-aborted:
	case <-time.After(time.Minute):
		t.Fatal("the watchdog did not abort the wait a minute after its 50ms deadline")
	}
	ft.end()
	errs := ft.reported()
	require.Len(t, errs, 1)
	require.True(t, strings.HasPrefix(errs[0], "TestStuck: still running after its deadline of 50ms; waiting on: step 7 of a turn limited to 2"), errs[0])
}

// A test that ends in time is not failed.
func TestWatchStaysQuietWhenTheTestEnds(t *testing.T) {
	ft := &fakeT{name: "TestQuick"}
	w := Watch(ft, 100*time.Millisecond, func() string { return "nothing" }, func() { t.Error("aborted a test that ended") })
	w.Stop()
	ft.end() // Stop twice is fine
	time.Sleep(300 * time.Millisecond)
	require.Empty(t, ft.reported())
}
