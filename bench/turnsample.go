package bench

import (
	"context"
	"fmt"
	"time"

	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/provider"
)

// sampleDriver runs turns of the agent-sample workflow.
type sampleDriver struct {
	e        *env
	wid      string
	runID    string
	messages int
	// extra are messages the next turn adds before its prompt.
	extra []provider.Message
	// route, when set, is the provider of the turns instead of the one
	// answering with responses of the opened length; tools are the tools
	// offered to the model; perTurn is the number of messages a turn adds
	// (2 when zero: the prompt and the answer).
	route   string
	tools   []provider.Tool
	perTurn int
}

func (s *sampleDriver) workflowID() string { return s.wid }

func (s *sampleDriver) open(ctx context.Context, name string, n, chunks int) error {
	s.wid = "sample-" + name
	s.messages = n
	route := providerName(chunks)
	if s.route != "" {
		route = s.route
	}
	run, err := s.e.tc.ExecuteWorkflow(ctx, temporalclient.StartWorkflowOptions{ID: s.wid, TaskQueue: taskQueue}, SampleWorkflowName,
		SampleState{Provider: route, Model: "bench", Tools: s.tools, Messages: Conversation(n, s.e.cfg.Turns.MessageBytes)})
	if err != nil {
		return fmt.Errorf("starting %s: %w", s.wid, err)
	}
	s.runID = run.GetRunID()
	return nil
}

func (s *sampleDriver) turn(ctx context.Context, prompt string) error {
	uctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	h, err := s.e.tc.UpdateWorkflow(uctx, temporalclient.UpdateWorkflowOptions{
		WorkflowID:   s.wid,
		UpdateName:   SampleUpdateTurn,
		Args:         []any{SampleTurnRequest{Messages: s.extra, Prompt: prompt}},
		WaitForStage: temporalclient.WorkflowUpdateStageCompleted,
	})
	var out SampleTurnResult
	if err == nil {
		err = h.Get(uctx, &out)
	}
	if err != nil {
		return err
	}
	perTurn := s.perTurn
	if perTurn == 0 {
		perTurn = 2
	}
	if want := s.messages + len(s.extra) + perTurn; out.Messages != want {
		return fmt.Errorf("the conversation holds %d messages after the turn, want %d", out.Messages, want)
	}
	s.messages = out.Messages
	return nil
}

func (s *sampleDriver) close(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.e.tc.SignalWorkflow(sctx, s.wid, "", SampleSignalDone, nil); err == nil {
		if err := s.e.tc.GetWorkflow(sctx, s.wid, "").Get(sctx, nil); err == nil {
			return nil
		}
	}
	// A workflow that no longer answers (a limit failed it) is ended; one
	// the server already closed refuses the termination, which is fine.
	_ = s.e.tc.TerminateWorkflow(ctx, s.wid, "", "bench: sample ended")
	return nil
}
