package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The runtime context (docs/FORMAT.md §10.4): before each model call the
// harness's agent loop renders its dynamic context sections, here the
// sandbox policy's (the file policy) and the approval policy's, into one
// snapshot, and stores it as a user/message from the plugin
// @deepseek-ai/dsh-system-prompt after the step's claimed inputs whenever
// it differs from the snapshot the session's surface still holds. The
// model reads it as history; a compaction that replaces it makes the next
// call store it again.

// ContextPolicy is what the runtime context states: the session's sandbox
// mode and approval policy.
type ContextPolicy struct {
	SandboxMode    string `json:"sandboxMode"`
	ApprovalPolicy string `json:"approvalPolicy"`
}

// runtimeContextPlugin is the source plugin of the snapshot messages.
const runtimeContextPlugin = "@deepseek-ai/dsh-system-prompt"

// contextSection is one named part of a snapshot.
type contextSection struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// contextSections renders the sections of p for a session whose workspace
// root is root, in the harness's order (sandbox:policy at 110,
// approval:policy at 115), with its texts.
func contextSections(p ContextPolicy, root string) []contextSection {
	var sandbox string
	switch p.SandboxMode {
	case wire.SandboxReadOnly:
		sandbox = "Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox cannot modify files in the standing mode. Do not refuse a required modification from this policy alone: try an available tool normally and follow any denial and escalation guidance it returns."
	case wire.SandboxWorkspaceWrite:
		sandbox = "Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: " + jsString(root) + ". Some platform temporary areas may also be writable."
	default:
		sandbox = "Current DSH file policy: danger-full-access. The DSH file sandbox does not restrict file modifications by available operations."
	}
	approval := "Approval policy: ask. Operations that require approval may ask through the configured answerers; without an available answerer, the request fails closed."
	if p.ApprovalPolicy == wire.ApprovalNever {
		approval = "Approval prompts are disabled in this session: actions that require approval are rejected automatically — do not request sandbox escalation (do not set `sandbox_permissions`)."
	}
	return []contextSection{{Name: "sandbox:policy", Text: sandbox}, {Name: "approval:policy", Text: approval}}
}

// joinSections is the snapshot text of sections (the harness's
// joinContextSections).
func joinSections(sections []contextSection) string {
	texts := make([]string, len(sections))
	for i, s := range sections {
		texts[i] = s.Text
	}
	return "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\n" + strings.Join(texts, "\n\n")
}

// jsString is JSON.stringify of a string: JSON without HTML escapes, and
// U+2028 and U+2029 as themselves.
func jsString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	return strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(out)
}

// workspaceRoot is the harness's resolveWorkspaceRoot of a session's cwd:
// its real path (the path itself when it has none), made absolute; the
// worker's directory for a session without a cwd.
func workspaceRoot(cwd string) string {
	if real, err := filepath.EvalSymlinks(cwd); err == nil && cwd != "" {
		cwd = real
	}
	if abs, err := filepath.Abs(cwd); err == nil {
		return abs
	}
	if wd, err := os.Getwd(); err == nil && cwd == "" {
		return wd
	}
	return cwd
}

// ContextSection is one named part of the runtime context.
type ContextSection = contextSection

// RuntimeContext returns the runtime-context snapshot of a session under
// p whose cwd is cwd, and its sections, as CallModel stores it.
func RuntimeContext(p ContextPolicy, cwd string) (string, []ContextSection) {
	sections := contextSections(p, workspaceRoot(cwd))
	return joinSections(sections), sections
}

// retainedContext returns the text of the snapshot the log still holds on
// its surface: the last snapshot message on the surface, scanning back
// (the harness's RuntimeContextProjection); ok is false when there is none
// (text is "" too for one whose content is not a single text block).
func retainedContext(events []session.Event) (text string, ok bool, err error) {
	order, err := surfaceOrder(events)
	if err != nil {
		return "", false, err
	}
	on := make(map[int]bool, len(order))
	for _, i := range order {
		on[i] = true
	}
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Type != wire.TypeUserMessage {
			continue
		}
		var m struct {
			Content []storedBlock `json:"content"`
			Source  struct {
				Kind   string `json:"kind"`
				Plugin string `json:"plugin"`
			} `json:"source"`
		}
		if json.Unmarshal(e.Data, &m) != nil || m.Source.Kind != "plugin" || m.Source.Plugin != runtimeContextPlugin {
			continue
		}
		if on[i] {
			if len(m.Content) == 1 && m.Content[0].Type == wire.BlockText {
				return m.Content[0].Text, true, nil
			}
			return "", true, nil
		}
	}
	return "", false, nil
}

// runtimeContextMessage is the data of a snapshot message.
type runtimeContextMessage struct {
	Content []wire.TextContent `json:"content"`
	Source  struct {
		Kind     string           `json:"kind"`
		Plugin   string           `json:"plugin"`
		Form     string           `json:"form"`
		Sections []contextSection `json:"sections"`
	} `json:"source"`
	Role string `json:"role"`
	ID   string `json:"id"`
}

// projectContext stores the runtime context before the call's model
// request when the log's surface does not hold it already, and returns
// the conversation with it and the log's next seq. Activities without
// RuntimeContext, and a call whose input states no policy (a workflow that
// predates it), store none.
func (c *modelCall) projectContext(ctx context.Context, messages []provider.Message, next int64) ([]provider.Message, int64, error) {
	p := c.in.Policy
	if p == nil || !c.a.RuntimeContext {
		return messages, next, nil
	}
	text, sections := RuntimeContext(*p, c.h.Header().Cwd)
	var stored *session.Event
	n, err := c.h.Update(ctx, c.in.From, func(tail []session.Event, next int64) ([]session.Event, error) {
		if !c.continues(tail) {
			return nil, temporal.NewApplicationError(fmt.Sprintf(
				"model call of turn %d step %d: the log changed since its conversation was read", c.in.Turn, c.in.Step), wire.ErrTypeIO)
		}
		if len(tail) > len(c.read) {
			// Appended since the conversation was read: read again.
			return nil, temporal.NewApplicationError(fmt.Sprintf(
				"model call of turn %d step %d: the log grew since its conversation was read", c.in.Turn, c.in.Step), wire.ErrTypeIO)
		}
		retained, ok, err := retainedContext(tail)
		if err != nil {
			return nil, err
		}
		if ok && retained == text {
			return nil, nil
		}
		var m runtimeContextMessage
		m.Content = []wire.TextContent{{Type: wire.BlockText, Text: text}}
		m.Source.Kind, m.Source.Plugin, m.Source.Form, m.Source.Sections = "plugin", runtimeContextPlugin, "snapshot", sections
		m.Role = wire.RoleUser
		m.ID = "runtime-context-" + strconv.FormatInt(c.in.Turn, 10) + "-" + strconv.FormatInt(c.in.Step, 10)
		e, err := session.NewEvent(wire.TypeUserMessage, next, c.a.nowMs(), m)
		if err != nil {
			return nil, err
		}
		e.SurfaceOp = session.AppendOp()
		stored = &e
		return []session.Event{e}, nil
	})
	if err != nil {
		return nil, 0, activities.MapError(err)
	}
	if stored == nil {
		return messages, n, nil
	}
	c.read = append(c.read, *stored)
	c.seqs = append(c.seqs, stored.Seq)
	return append(messages, provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: text}}}), n, nil
}
