package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
)

// codeNotRunning is status's exit code when no daemon runs (as LSB's
// "program is not running").
const codeNotRunning = 3

func newStatusCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Show the daemon's pid, version, uptime, state directory and features",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st api.Status
			if err := call(api.TypeStatus, nil, &st); err != nil {
				if errors.Is(err, api.ErrNotRunning) {
					return &exitError{code: codeNotRunning, err: defaultRunsInstead(err)}
				}
				return err
			}
			st.BinaryVersion = api.Version
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			var feats []string
			for k, v := range st.Features {
				state := "off"
				if v {
					state = "on"
				}
				feats = append(feats, k+" "+state)
			}
			sort.Strings(feats)
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "daemon:    running, pid %d, up %s\n", st.PID, st.Uptime)
			fmt.Fprintf(w, "version:   %s (protocol %d)\n", st.Version, st.Protocol)
			switch {
			case st.Version == api.Version:
			case api.NewerVersion(api.Version, st.Version):
				fmt.Fprintf(w, "           this binary is %s: run `supervisor daemon restart` to switch to it (servers keep running)\n", api.Version)
			default:
				fmt.Fprintf(w, "           this binary is older (%s): another supervisor on PATH? see `supervisor doctor`\n", api.Version)
			}
			fmt.Fprintf(w, "state dir: %s\n", clean(st.StateDir))
			fmt.Fprintf(w, "socket:    %s\n", clean(st.Socket))
			fmt.Fprintf(w, "features:  %s\n", strings.Join(feats, ", "))
			for _, l := range st.Limits {
				fmt.Fprintf(w, "limits:    %s\n", clean(l))
			}
			for _, k := range []string{"memory_max", "cpu_max", "pids_max"} {
				if v, ok := st.ResourceLimits[k]; ok {
					fmt.Fprintf(w, "%-10s %s\n", k+":", clean(v))
				}
			}
			if st.Sandbox != "" {
				fmt.Fprintf(w, "sandbox:   %s\n", clean(st.Sandbox))
			}
			if st.Restarter != "" {
				fmt.Fprintf(w, "restarter: %s\n", clean(st.Restarter))
			}
			fmt.Fprintf(w, "sessions:  %d active; processes: %d live, %d records\n", st.Sessions, st.Processes, st.Records)
			for _, h := range st.LogHubs {
				role := "re-joined from an earlier daemon"
				if h.Primary {
					role = "new servers' output goes here"
				}
				fmt.Fprintf(w, "log hub:   pid %d, %d pipes (%s)\n", h.PID, h.Pipes, role)
			}
			if r := st.Recovery; r != nil {
				fmt.Fprintf(w, "recovery:  at %s: %s\n", r.At, clean(r.String()))
				if sr := r.StoreRebuilt; sr != nil {
					fmt.Fprintf(w, "registry:  %s\n", storeRebuiltLine(sr))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// defaultRunsInstead adds to a "not running" error that the default
// instance does run, when SUPERVISOR_STATE_DIR or SUPERVISOR_SOCKET
// selected another one: a shell left with a test's or a container's
// variables otherwise reports a daemon the user can see running as gone.
func defaultRunsInstead(err error) error {
	var vars []string
	for _, v := range []string{api.EnvStateDir, api.EnvSocket} {
		if os.Getenv(v) != "" {
			vars = append(vars, v)
		}
	}
	if len(vars) == 0 {
		return err
	}
	sel, serr := paths()
	def, derr := api.ResolvePaths(func(k string) string {
		if k == api.EnvStateDir || k == api.EnvSocket {
			return ""
		}
		return os.Getenv(k)
	})
	if serr != nil || derr != nil || def.Socket == sel.Socket {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, cerr := api.Dial(ctx, def.Socket)
	if cerr != nil {
		return err
	}
	pid := c.Daemon.PID
	c.Close()
	return &hintError{
		err: fmt.Errorf("%w; the default instance does run (pid %d, socket %s), but %s selects this one",
			err, pid, clean(def.Socket), strings.Join(vars, " and ")),
		hint: fmt.Sprintf("unset %s to talk to the default daemon, or start this one with `supervisor daemon`", strings.Join(vars, " ")),
	}
}

// storeRebuiltLine tells the user that the registry file was unreadable at
// start, where it was kept, and why.
func storeRebuiltLine(sr *api.StoreRebuilt) string {
	return fmt.Sprintf("was unreadable at start and was rebuilt from the markers of running processes; the damaged file is kept at %s (%s)", clean(sr.MovedTo), clean(sr.Reason))
}
