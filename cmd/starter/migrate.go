package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

const migrateLong = `Migrate sessions stored in format v0 (the format of the published DeepSeek
Harness: session.jsonl[.zstd]) to format v3 (session.v3.jsonl[.zstd]), as a
resume would: the v3 log is published beside the v0 file, which is left
untouched, from the v0 log's valid events (a torn tail is left behind in the
old file); seedLength becomes the inherited count. From then on the v3 log is
the session; a later write to the v0 file by the harness is reported as a
generation conflict.

--id ID migrates one session, --all every v0 session of the root (with a
progress line per session on stderr; a session that fails is reported and the
others go on). --era-a DIR imports instead every Era A flat log
(DIR/_no-cwd/<id>.jsonl, DIR/cwd-<hex>/<id>.jsonl, version 1 headers) into the
root: its committed region, up to the last turn/end, becomes a new session;
the files under DIR are only read (the summary sidecars are not imported).
--dry-run validates and reports without writing. Each session's
write lease is taken while it is migrated: a session owned by a running
workflow fails with "already owned".`

func newLogMigrateCmd(a *app, sf *storeFlags) *cobra.Command {
	var id, eraA string
	var all, dryRun bool
	cmd := &cobra.Command{
		Use:   "migrate (--id ID | --all | --era-a DIR) [--dry-run]",
		Short: "Migrate harness (format v0) sessions to format v3",
		Long:  migrateLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, set := range []bool{id != "", all, eraA != ""} {
				if set {
					n++
				}
			}
			if n != 1 {
				return usageErrorf("pass exactly one of --id ID, --all and --era-a DIR")
			}
			st, err := a.openStore(sf)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			opts := jsonl.MigrateOptions{DryRun: dryRun}
			if eraA != "" {
				return importEraA(ctx, a, st, eraA, opts)
			}
			if id != "" {
				res, err := st.Migrate(ctx, id, opts)
				if err != nil {
					return err
				}
				return printMigration(a.stdout, res)
			}
			return migrateAll(ctx, a, st, opts)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "session id")
	cmd.Flags().BoolVar(&all, "all", false, "migrate every format v0 session of the root")
	cmd.Flags().StringVar(&eraA, "era-a", "", "import the Era A flat logs under DIR into the root")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate and report without writing")
	return cmd
}

// migrateAll migrates every v0 session of the root, reporting progress on
// stderr and each outcome on stdout. It fails when any session failed.
func migrateAll(ctx context.Context, a *app, st *jsonl.Store, opts jsonl.MigrateOptions) error {
	snaps, err := st.List(ctx)
	if err != nil {
		return err
	}
	var ids []string
	for _, s := range snaps {
		switch {
		case s.Problem != nil:
			// Not a session this build can serve (another format, a
			// conflict, damage): shown, never counted as a v0 session.
			fmt.Fprintf(a.stdout, "skipped %s: %s\n", s.Path, s.Problem.Reason)
		case !s.Pending && s.Header.Version == wire.FormatVersionV0:
			ids = append(ids, s.Header.ID)
		}
	}
	if len(ids) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no format v0 sessions under %s\n", st.Root())
		return err
	}
	failed := 0
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		fmt.Fprintf(a.stderr, "migrate [%d/%d] %q\n", i+1, len(ids), id)
		res, err := st.Migrate(ctx, id, opts)
		if err != nil {
			failed++
			fmt.Fprintf(a.stdout, "session %q: not migrated: %v\n", id, err)
			continue
		}
		if err := printMigration(a.stdout, res); err != nil {
			return err
		}
	}
	verb := "migrated"
	if opts.DryRun {
		verb = "would migrate"
	}
	fmt.Fprintf(a.stdout, "%s %d of %d format v0 sessions\n", verb, len(ids)-failed, len(ids))
	if failed > 0 {
		return errors.New(plural(failed, "session") + " could not be migrated")
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// printMigration prints one migration outcome.
func printMigration(w io.Writer, r *jsonl.MigrationResult) error {
	var err error
	switch {
	case r.Current:
		_, err = fmt.Fprintf(w, "session %q is already format v%d (%s)\n", r.SessionID, r.ToVersion, r.To)
	default:
		verb := "migrated"
		if r.DryRun {
			verb = "would migrate"
		}
		line := fmt.Sprintf("session %q: %s %s (v%d) to %s (v%d): %d events", r.SessionID, verb, r.From, r.FromVersion, r.To, r.ToVersion, r.Events)
		if r.InheritedEventCount > 0 {
			line += fmt.Sprintf(", %d inherited", r.InheritedEventCount)
		}
		if r.DroppedBytes > 0 {
			line += fmt.Sprintf(", a torn tail of %d bytes left in the old file", r.DroppedBytes)
		}
		_, err = fmt.Fprintln(w, line)
	}
	return err
}

// importEraA imports every Era A flat log under dir, reporting progress on
// stderr and each outcome on stdout. It fails when any log failed.
func importEraA(ctx context.Context, a *app, st *jsonl.Store, dir string, opts jsonl.MigrateOptions) error {
	paths, err := jsonl.FindEraALogs(dir)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no Era A logs under %s\n", dir)
		return err
	}
	if !opts.DryRun {
		if err := os.MkdirAll(st.Root(), 0o700); err != nil {
			return fmt.Errorf("create the store root: %w", err)
		}
	}
	failed := 0
	for i, path := range paths {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		fmt.Fprintf(a.stderr, "import [%d/%d] %s\n", i+1, len(paths), path)
		res, err := st.ImportEraA(ctx, path, opts)
		if err != nil {
			failed++
			fmt.Fprintf(a.stdout, "%s: not imported: %v\n", path, err)
			continue
		}
		verb := "imported"
		if opts.DryRun {
			verb = "would import"
		}
		line := fmt.Sprintf("session %q: %s %s (Era A) to %s: %d events", res.SessionID, verb, res.From, res.To, res.Events)
		if res.DroppedBytes > 0 {
			line += fmt.Sprintf(", an uncommitted tail of %d bytes left behind", res.DroppedBytes)
		}
		fmt.Fprintln(a.stdout, line)
	}
	verb := "imported"
	if opts.DryRun {
		verb = "would import"
	}
	fmt.Fprintf(a.stdout, "%s %d of %d Era A logs\n", verb, len(paths)-failed, len(paths))
	if failed > 0 {
		return errors.New(plural(failed, "Era A log") + " could not be imported")
	}
	return nil
}
