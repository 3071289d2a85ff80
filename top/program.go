package top

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// Fetch takes one snapshot from the daemon.
type Fetch func() (Snapshot, error)

// Model is the terminal view: it refreshes every interval, re-sorts on a
// sort key, and quits on q, Esc or Ctrl-C.
type Model struct {
	fetch         Fetch
	interval      time.Duration
	by            string
	snap          Snapshot
	err           error
	width, height int
}

// NewModel is the view of fetch's snapshots, first sorted by by.
func NewModel(fetch Fetch, interval time.Duration, by string) Model {
	return Model{fetch: fetch, interval: interval, by: by}
}

type snapMsg struct {
	snap Snapshot
	err  error
}

type tickMsg struct{}

func (m Model) refresh() tea.Msg {
	s, err := m.fetch()
	return snapMsg{s, err}
}

// Init takes the first snapshot.
func (m Model) Init() tea.Cmd { return m.refresh }

// Update handles keys, snapshots, the refresh tick and the window size.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "esc", "ctrl+c":
			return m, tea.Quit
		}
		for _, k := range sortKeys {
			if msg.String() == k.key {
				m.by = k.name
			}
		}
	case snapMsg:
		m.snap, m.err = msg.snap, msg.err
		return m, tea.Tick(m.interval, func(time.Time) tea.Msg { return tickMsg{} })
	case tickMsg:
		return m, m.refresh
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	}
	return m, nil
}

// View renders the latest snapshot, or why there is none.
func (m Model) View() string {
	if m.err != nil {
		return "supervisor top: " + m.err.Error() + "\n(retrying; q quits)\n"
	}
	if m.snap.At.IsZero() {
		return "supervisor top: asking the daemon...\n"
	}
	return Render(m.snap, m.by, m.width, m.height)
}
