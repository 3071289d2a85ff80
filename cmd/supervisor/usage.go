package main

import (
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// examples are each command's --help examples, by command path. They live
// in one place so that a new command without any is noticed (TestEveryHelpShowsExamplesAndItsFlags
// walks the whole tree).
var examples = map[string]string{
	"supervisor":                          "  supervisor install --all          # wrap every agent host's stdio MCP servers\n  supervisor ps                     # what runs now\n  supervisor doctor                 # look for leaked servers and stale files",
	"supervisor run":                      "  supervisor run --name fs -- npx -y @modelcontextprotocol/server-filesystem ~/src\n  supervisor run --session $SUPERVISOR_SESSION --grace 10s -- ./server --stdio\n  supervisor run --name big --memory-max 2G --pids-max 200 -- ./server\n  supervisor run --name gh --allow-env GITHUB_TOKEN --network api.github.com:443 -- npx -y @modelcontextprotocol/server-github",
	"supervisor ps":                       "  supervisor ps\n  supervisor ps --all --wide\n  supervisor ps --session 1a2b3c4d --json",
	"supervisor sessions":                 "  supervisor sessions\n  supervisor sessions --all --no-trunc",
	"supervisor top":                      "  supervisor top                     # interactive: m, c, ... sort; q quits\n  supervisor top --sort cpu --plain --count 1",
	"supervisor session":                  "  supervisor session end 1a2b3c4d",
	"supervisor session end":              "  supervisor session end 1a2b3c4d --grace 2s\n  echo '{\"session_id\":\"abc\"}' | supervisor session end --hook",
	"supervisor stop":                     "  supervisor stop fs\n  supervisor stop p-1a2b3c4d5e --grace 0s --json",
	"supervisor status":                   "  supervisor status\n  supervisor status --json",
	"supervisor restart":                  "  supervisor restart web           # a server started with supervisor ensure\n  supervisor restart p-1a2b3c4d5e --grace 10s --json",
	"supervisor inspect":                  "  supervisor inspect fs\n  supervisor inspect p-1a2b3c4d5e --lines 50 --json",
	"supervisor daemon":                   "  supervisor daemon                      # start it in the background\n  supervisor daemon --foreground --log-level debug\n  supervisor daemon --metrics-addr 127.0.0.1:9464",
	"supervisor daemon stop":              "  supervisor daemon stop\n  supervisor daemon stop --keep-processes   # servers keep running for the next daemon",
	"supervisor daemon restart":           "  supervisor daemon restart          # after an upgrade: servers keep running\n  supervisor daemon restart --json",
	"supervisor daemon reload":            "  supervisor daemon reload           # re-read the config file",
	"supervisor daemon install-service":   "  supervisor daemon install-service --dry-run\n  supervisor daemon install-service",
	"supervisor daemon uninstall-service": "  supervisor daemon uninstall-service",
	"supervisor version":                  "  supervisor version",
	"supervisor demo":                     "  supervisor demo",
	"supervisor init":                     "  # in a Dockerfile:\n  ENTRYPOINT [\"supervisor\", \"init\", \"--\"]\n  CMD [\"my-agent\", \"--serve\"]",
	"supervisor ensure":                   "  supervisor ensure --port 8931 --health tcp --name browser -- npx @playwright/mcp --port 8931\n  supervisor ensure --port 9000 --health http://127.0.0.1:9000/health --linger 10m -- ./server",
	"supervisor breaker":                  "  supervisor breaker list\n  supervisor breaker reset fs",
	"supervisor breaker list":             "  supervisor breaker list\n  supervisor breaker list --json",
	"supervisor breaker reset":            "  supervisor breaker reset fs\n  supervisor breaker reset 9f2c4e1a --json",
	"supervisor logs":                     "  supervisor logs browser\n  supervisor logs browser -f --tail 20\n  supervisor logs -f --timestamps          # every server, each line labelled\n  supervisor logs --since 1h --tail 0",
	"supervisor doctor":                   "  supervisor doctor\n  supervisor doctor --fix\n  supervisor doctor --json",
	"supervisor events":                   "  supervisor events\n  supervisor events -f\n  supervisor events --session 1a2b3c4d --lines 0 --json",
	"supervisor hosts":                    "  supervisor hosts\n  supervisor hosts --project . --json",
	"supervisor install":                  "  supervisor install --all --dry-run\n  supervisor install claude-code cursor --hooks\n  supervisor install claude-code --project .",
	"supervisor uninstall":                "  supervisor uninstall --all\n  supervisor uninstall cursor --dry-run",
	"supervisor sandbox":                  "  supervisor sandbox check --sandbox -- npx -y @modelcontextprotocol/server-filesystem ~/notes",
	"supervisor sandbox learn":            "  supervisor sandbox learn --name notes -- npx -y @modelcontextprotocol/server-memory\n  supervisor sandbox learn --out notes.toml -- ./server --stdio < requests.jsonl",
	"supervisor sandbox check":            "  supervisor sandbox check --allow-env GITHUB_TOKEN --network none -- npx -y @modelcontextprotocol/server-github\n  supervisor sandbox check --name docs -- ./server   # the config's [servers.docs] decides",
	"supervisor config":                   "  supervisor config show",
	"supervisor config show":              "  supervisor config show\n  supervisor config show --json",
	"supervisor config init":              "  supervisor config init                 # a commented starter; changes no default\n  supervisor config init --print > my.toml\n  supervisor config init --force",
	"supervisor metrics":                  "  supervisor metrics | grep supervisor_processes",
	"supervisor completion":               "  source <(supervisor completion bash)\n  supervisor completion zsh > \"${fpath[1]}/_supervisor\"",
	"supervisor completion bash":          "  source <(supervisor completion bash)",
	"supervisor completion zsh":           "  supervisor completion zsh > \"${fpath[1]}/_supervisor\"",
	"supervisor completion fish":          "  supervisor completion fish > ~/.config/fish/completions/supervisor.fish",
	"supervisor completion powershell":    "  supervisor completion powershell | Out-String | Invoke-Expression",
	"supervisor help":                     "  supervisor help ps\n  supervisor help daemon stop",
}

// flagMention finds the flags a Use line names already: --name, or -f
// as its own token. Compiled when help is first shown, not at each start.
var flagMention = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`--([a-z0-9-]+)|(?:^|[\s\[|])-([a-zA-Z])\b`)
})

// finishHelp completes every command's help: its examples, and a usage
// line that names every flag. A hand-written Use line keeps its wording
// (required flags, alternatives); the flags it leaves out are added as
// [--flag VALUE] before its "-- CMD" or "| other form" part, and cobra's
// catch-all "[flags]" goes.
func finishHelp(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" {
			c.Example = examples[c.CommandPath()]
		}
		if c.HasParent() {
			c.Use = useWithFlags(c)
			c.DisableFlagsInUseLine = true
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func useWithFlags(c *cobra.Command) string {
	named := map[string]bool{}
	for _, m := range flagMention().FindAllStringSubmatch(c.Use, -1) {
		named[m[1]+m[2]] = true
	}
	var add []string
	c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" || named[f.Name] || (f.Shorthand != "" && named[f.Shorthand]) {
			return
		}
		s := "--" + f.Name
		if f.Shorthand != "" {
			s = "-" + f.Shorthand + "|" + s
		}
		if v := flagValueName(f); v != "" {
			s += " " + v
		}
		add = append(add, "["+s+"]")
	})
	if len(add) == 0 {
		return c.Use
	}
	use, rest := c.Use, ""
	for _, sep := range []string{" -- ", " | "} {
		if i := strings.Index(use, sep); i >= 0 {
			use, rest = use[:i], use[i:]
			break
		}
	}
	return use + " " + strings.Join(add, " ") + rest
}

// flagValueName is what a flag's value is called on a usage line: the
// `word` its usage quotes, else a short name for its type; "" for a
// switch.
func flagValueName(f *pflag.Flag) string {
	if f.NoOptDefVal != "" {
		return "" // a bool (or an optional value): given bare
	}
	name, _ := pflag.UnquoteUsage(f)
	switch name {
	case "":
		return ""
	case "int", "uint", "ints", "int64":
		return "N"
	case "duration":
		return "D"
	case "string", "strings", "stringArray":
		return "VALUE"
	}
	return strings.ToUpper(name)
}
