package sessiontest

import (
	"context"
	"strings"
	"sync"

	"github.com/sessionflow/sessionflow/workflows"

	"go.temporal.io/sdk/log"

	"github.com/sessionflow/sessionflow/wire"
)

// Hook activity names used by the tests.
const (
	HookSetup   = "test.setup"
	HookCommit  = "test.commit"
	HookPublish = "test.publish"
	HookDispose = "test.dispose"
)

// Hooks holds the hook activities the tests register; each field may be
// replaced before the environment runs.
type Hooks struct {
	mu          sync.Mutex
	calls       []string
	SetupFunc   func(ctx context.Context, in wire.SetupInput) (workflows.SetupResult, error)
	CommitFunc  func(ctx context.Context, in wire.SetupInput) error
	PublishFunc func(ctx context.Context, in wire.PublishInput) error
	DisposeFunc func(ctx context.Context, in wire.DisposeInput) error
}

func (h *Hooks) record(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, s)
}

// Log returns the hook calls so far, in order ("setup:start",
// "setup:end", "setup:commit", published entry types, "dispose:<reason>").
func (h *Hooks) Log() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// Setup is the setup hook activity: it records the call and runs
// SetupFunc when set.
func (h *Hooks) Setup(ctx context.Context, in wire.SetupInput) (workflows.SetupResult, error) {
	h.record("setup:start")
	var res workflows.SetupResult
	var err error
	if h.SetupFunc != nil {
		res, err = h.SetupFunc(ctx, in)
	}
	if err == nil {
		h.record("setup:end")
	}
	return res, err
}

// Commit is the commit hook activity: it records the call and runs
// CommitFunc when set.
func (h *Hooks) Commit(ctx context.Context, in wire.SetupInput) error {
	h.record("setup:commit")
	if h.CommitFunc != nil {
		return h.CommitFunc(ctx, in)
	}
	return nil
}

// Publish is the publish hook activity: it records the entry's type
// (and source) and runs PublishFunc when set.
func (h *Hooks) Publish(ctx context.Context, in wire.PublishInput) error {
	name := in.Entry.Type
	if in.Entry.Source != "" {
		name += ":" + in.Entry.Source
	}
	h.record(name)
	if h.PublishFunc != nil {
		return h.PublishFunc(ctx, in)
	}
	return nil
}

// Dispose is the dispose hook activity: it records the reason and runs
// DisposeFunc when set.
func (h *Hooks) Dispose(ctx context.Context, in wire.DisposeInput) error {
	h.record("dispose:" + in.Reason)
	if h.DisposeFunc != nil {
		return h.DisposeFunc(ctx, in)
	}
	return nil
}

// AllHooks names every test hook.
var AllHooks = wire.Hooks{
	SetupActivity:   HookSetup,
	CommitActivity:  HookCommit,
	PublishActivity: HookPublish,
	DisposeActivity: HookDispose,
}

// LogCapture is a log.Logger keeping warnings.
type LogCapture struct {
	mu    sync.Mutex
	warns []string
}

// Debug drops the message.
func (c *LogCapture) Debug(string, ...any) {}

// Info drops the message.
func (c *LogCapture) Info(string, ...any) {}

// Error keeps the message, marked ERROR.
func (c *LogCapture) Error(msg string, kv ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warns = append(c.warns, "ERROR "+msg)
}

// Warn keeps the message.
func (c *LogCapture) Warn(msg string, kv ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warns = append(c.warns, msg)
}

// Warnings returns the kept messages containing substr.
func (c *LogCapture) Warnings(substr string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, w := range c.warns {
		if strings.Contains(w, substr) {
			out = append(out, w)
		}
	}
	return out
}

var _ log.Logger = (*LogCapture)(nil)
