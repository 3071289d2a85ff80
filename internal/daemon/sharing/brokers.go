package sharing

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/broker"
	"github.com/seed-86a41135/supervisor/internal/cgroup"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// A `run --share` server (design §11) is one broker process per key, which
// runs the upstream as its child and relays for every client. These are
// the names the daemon gives a broker and the questions it asks one.

// BrokerSocket is where the broker of key listens: beside the daemon's
// socket (a private directory, checked as that one is).
func BrokerSocket(p api.Paths, key string) string {
	return filepath.Join(filepath.Dir(p.Socket), "b-"+key[:16]+".sock")
}

// BrokerSession is the pseudo session a broker's record lives in: it
// belongs to no host.
func BrokerSession(key string) string { return "broker-" + key[:12] }

// LimitedKey is the broker key of a server run within limits described by
// limits (the daemon's one-line description): clients asking for other
// limits get a broker of their own.
func LimitedKey(key, limits string) string {
	sum := sha256.Sum256([]byte(key + "\x00limits\x00" + limits))
	return hex.EncodeToString(sum[:])
}

// SandboxedKey is the broker key of clients whose server runs in the
// sandbox spec: clients asking another policy get a broker of their own.
func SandboxedKey(key string, spec sandbox.Spec) string {
	policy, _ := json.Marshal(spec) // a struct of strings and ints: no error
	sum := sha256.Sum256([]byte(key + "\x00sandbox\x00" + string(policy)))
	return hex.EncodeToString(sum[:])
}

// SoloKey is the broker key of a lazy or idle client that is not shared:
// its own, derived from the server key so it cannot collide with one.
func SoloKey(serverKey, clientID string) string {
	sum := sha256.Sum256([]byte(serverKey + "\x00solo\x00" + clientID))
	return hex.EncodeToString(sum[:])
}

// AskStats asks the broker at socket for its figures, within a second.
func AskStats(socket string) (broker.Stats, error) {
	var st broker.Stats
	return st, ask(socket, broker.MsgStats, time.Second, &st)
}

// AskCache asks the broker at socket what its lazy-start cache holds.
func AskCache(socket string) (broker.CacheReply, error) {
	var cr broker.CacheReply
	return cr, ask(socket, broker.MsgCache, 5*time.Second, &cr)
}

// ask sends the broker at socket a request without arguments and decodes
// its answer into out, all within limit.
func ask(socket, msgType string, limit time.Duration, out any) error {
	c, err := DialBroker(socket)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(limit)); err != nil {
		return err
	}
	if err := c.Send(msgType, nil); err != nil {
		return err
	}
	m, fds, err := c.Recv()
	api.CloseFds(fds)
	if err != nil {
		return err
	}
	return api.Decode(m, out)
}

// brokerGOMAXPROCS is the broker's own GOMAXPROCS. A relay of pipes needs no
// parallelism, and each P costs memory for the broker's life: one measured
// 0.4 MiB less private memory per broker than two, with no slower relay
// (bench shared-memory and relay-cost, issue 14). It goes in the broker's
// environment at spawn because the runtime sizes itself at start:
// runtime.GOMAXPROCS(1) called later saved nothing.
const brokerGOMAXPROCS = "1"

// BrokerEnv is the broker's environment: the client's, which the broker
// passes on to its upstream, plus GOMAXPROCS for the broker itself unless
// the client's environment sets one (then both keep the client's). drop
// names what the broker must take out again before it starts the
// upstream, which sees the client's environment as it was.
func BrokerEnv(env []string) (out, drop []string) {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); strings.EqualFold(k, "GOMAXPROCS") {
			return env, nil
		}
	}
	out = append(append(make([]string, 0, len(env)+1), env...), "GOMAXPROCS="+brokerGOMAXPROCS)
	return out, []string{"GOMAXPROCS"}
}

// A shared server's broker runs in its upstream's cgroup, within the same
// limits (one tree, as the design's §11 broker is the server's parent):
// its own threads and memory count. Limits below these leave it no room.
const (
	brokerMinPids   = 32
	brokerMinMemory = 64 << 20
)

// BrokerRoom says why limits l are too small for a shared server, or "".
func BrokerRoom(l *api.Limits) string {
	switch {
	case l.PidsMax > 0 && l.PidsMax < brokerMinPids:
		return fmt.Sprintf("pids_max %d is too small for a shared server: its broker's own threads count against it; give it %d or more, or run it unshared (--share=false)", l.PidsMax, brokerMinPids)
	case l.MemoryMax > 0 && l.MemoryMax < brokerMinMemory:
		return fmt.Sprintf("memory_max %s is too small for a shared server: its broker's own memory counts against it; give it %s or more, or run it unshared (--share=false)", cgroup.FormatMemory(l.MemoryMax), cgroup.FormatMemory(brokerMinMemory))
	}
	return ""
}
