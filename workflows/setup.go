package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// initialize runs LIFECYCLE.md §6 for create and resume: setup, commit,
// the commit point (store) and publication.
// eventCount is the session's length including the unstored suffix;
// storeSuffix stores that suffix plus the setup events as one batch.
func (l *lifecycle) initialize(eventCount int64, storeSuffix func(extra []session.Event) error) error {
	l.phase.enter(wire.PhaseSetup)
	in := wire.SetupInput{SessionID: l.id, Source: l.source, Handle: *l.log.ref, Header: l.log.header, EventCount: eventCount, StoredCount: l.log.nextSeq}
	var setup SetupResult
	if l.hooks.SetupActivity != "" {
		err := l.aborts.race(func(ctx workflow.Context) workflow.Future {
			return workflow.ExecuteActivity(l.act(l.set.hookCtx(ctx), "setup hook"), l.hooks.SetupActivity, in)
		}, &setup)
		if err != nil {
			return err
		}
		if len(setup.Events) > 0 {
			if err := l.checkBatch("setup events", setup.Events, eventCount); err != nil {
				return err
			}
			if err := session.CheckAppendable(l.log.header, eventCount, setup.Events); err != nil {
				// Versioned only where it matters: setup events the store
				// would refuse now fail here, before the commit hook.
				if workflow.GetVersion(l.dctx, setupRulesChange, workflow.DefaultVersion, 1) >= 1 {
					return invalidArgument("setup events: " + err.Error())
				}
			}
		}
	}
	if err := l.aborts.check(); err != nil {
		return err
	}
	if l.hooks.CommitActivity != "" {
		err := unwrapActivity(workflow.ExecuteActivity(l.act(l.set.hookCtx(l.dctx), "commit hook"), l.hooks.CommitActivity, in).Get(l.dctx, nil))
		if err != nil {
			return err
		}
	}
	if err := l.aborts.check(); err != nil {
		return err
	}
	l.phase.enter(wire.PhaseCommitting)
	extra := setup.Events
	if len(l.agent.pins) > 0 && workflow.GetVersion(l.dctx, permissionsChange, workflow.DefaultVersion, 1) >= 1 {
		// The permission facts the options set, after the setup events.
		pins, err := pinEvents(l.agent.pins, eventCount+int64(len(extra)), workflow.Now(l.dctx).UnixMilli())
		if err != nil {
			return err
		}
		extra = append(slices.Clone(extra), pins...)
	}
	if l.agent.delegated != nil {
		// A one-shot child's prompt, as the harness stores it.
		in, err := l.agent.delegatedInput(eventCount+int64(len(extra)), workflow.Now(l.dctx).UnixMilli())
		if err != nil {
			return err
		}
		extra = append(slices.Clone(extra), in...)
	}
	if err := storeSuffix(extra); err != nil {
		return err
	}
	return l.publishAll()
}

// publishAll publishes the lifecycle entries with the checks of LIFECYCLE.md §6
// step 4.
func (l *lifecycle) publishAll() error {
	if err := l.aborts.check(); err != nil {
		return err
	}
	if err := l.publish(wire.LifecycleEntry{Type: wire.EntrySessionCreated}); err != nil {
		return err
	}
	if err := l.aborts.check(); err != nil {
		return err
	}
	if err := l.publish(wire.LifecycleEntry{Type: wire.EntryAgentCreated}); err != nil {
		return err
	}
	if err := l.publish(wire.LifecycleEntry{Type: wire.EntrySessionStart, Source: l.source}); err != nil {
		return err
	}
	return l.aborts.check()
}

func (l *lifecycle) publish(e wire.LifecycleEntry) error {
	if l.hooks.PublishActivity != "" {
		err := workflow.ExecuteActivity(l.act(l.set.hookCtx(l.dctx), "publish hook: "+e.Type), l.hooks.PublishActivity, wire.PublishInput{SessionID: l.id, Entry: e}).Get(l.dctx, nil)
		if err != nil {
			return unwrapActivity(err)
		}
	}
	l.phase.published(e)
	return nil
}
