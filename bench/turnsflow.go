package bench

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sessionflow/sessionflow/wire"
)

// flowDriver runs turns of a live sessionflow session with client.RunTurn:
// one update that completes when the turn that claimed the message has
// ended, as the sample's client waits on its update.
type flowDriver struct {
	e   *env
	id  string
	wid string
	// route, when set, is the provider of the turns instead of the one
	// answering with responses of the opened length; parallel, when
	// positive, is the session's maxParallelToolCalls.
	route    string
	parallel int
}

func (f *flowDriver) workflowID() string { return f.wid }

func (f *flowDriver) open(ctx context.Context, name string, n, chunks int) error {
	f.id = "turns-" + name
	opts := &wire.AgentOptions{Provider: providerName(chunks), Model: "bench"}
	if f.route != "" {
		opts.Provider = f.route
	}
	if f.parallel > 0 {
		p := float64(f.parallel)
		opts.MaxParallelToolCalls = &p
	}
	if n > 0 {
		if _, _, err := WriteConversationLog(ctx, f.e.store, f.id, n, f.e.cfg.Turns.MessageBytes, "bench"); err != nil {
			return err
		}
		s, err := f.e.sf.Resume(ctx, f.id, wire.ResumeSessionRequest{AgentOptions: opts})
		if err != nil {
			return fmt.Errorf("resuming %s: %w", f.id, err)
		}
		f.wid = s.WorkflowID
		return nil
	}
	s, err := f.e.sf.Create(ctx, wire.CreateSessionRequest{SessionID: f.id, Meta: &wire.SessionMeta{Cwd: "/bench"}, AgentOptions: opts})
	if err != nil {
		return fmt.Errorf("creating %s: %w", f.id, err)
	}
	f.wid = s.WorkflowID
	return nil
}

func (f *flowDriver) turn(ctx context.Context, prompt string) error {
	content, err := json.Marshal(prompt)
	if err != nil {
		return err
	}
	uctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	in, err := f.e.sf.RunTurn(uctx, f.id, wire.InputRequest{Content: content})
	if err != nil {
		return fmt.Errorf("run turn: %w", err)
	}
	if in.Ended.Reason.Kind != wire.TurnEndCompleted {
		return fmt.Errorf("turn %d ended %s", in.Ended.Turn, in.Ended.Reason.Kind)
	}
	return nil
}

func (f *flowDriver) close(ctx context.Context) error {
	_, err := f.e.sf.Dispose(ctx, f.id)
	return err
}
