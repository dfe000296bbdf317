package inspect

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"kaas/broker/admin"
)

// Model is the bubbletea model of the live view: a list of actors grouped
// by kind, a filter, and a drill-in detail of one actor.
type Model struct {
	client  *Client
	addr    string
	refresh time.Duration

	snap    admin.Snapshot
	rows    []admin.Actor // snap filtered and sorted, as shown
	err     error
	cursor  int
	top     int // first row shown
	filter  string
	typing  bool // the filter line has the keyboard
	kinds   []string
	kindIdx int // 0: all kinds, i: kinds[i-1]

	detailName string
	detail     map[string]any
	detailErr  error
	detailTop  int

	width, height int
}

// NewModel builds the view for the admin listener at addr; actor, if set,
// opens straight into that actor's detail.
func NewModel(client *Client, addr, filter, actor string, refresh time.Duration) Model {
	if refresh <= 0 {
		refresh = time.Second
	}
	return Model{client: client, addr: addr, filter: filter, detailName: actor, refresh: refresh, width: 100, height: 30}
}

type (
	tickMsg     time.Time
	snapshotMsg struct {
		snap admin.Snapshot
		err  error
	}
	detailMsg struct {
		name string
		d    map[string]any
		err  error
	}
)

// Init fetches at once; later fetches follow each tick.
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.fetch(), m.tick())
}

func (m Model) tick() tea.Cmd {
	return tea.Tick(m.refresh, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// fetch gets whatever the current screen shows: the list, or the detail.
func (m Model) fetch() tea.Cmd {
	c, name := m.client, m.detailName
	if name != "" {
		return func() tea.Msg {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			d, err := c.Detail(ctx, name)
			return detailMsg{name: name, d: d, err: err}
		}
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		s, err := c.Snapshot(ctx, "")
		return snapshotMsg{snap: s, err: err}
	}
}

// Update handles keys, refresh ticks and fetched data.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tickMsg:
		return m, tea.Batch(m.fetch(), m.tick())
	case snapshotMsg:
		m.err = msg.err
		if msg.err == nil {
			m.snap = msg.snap
			m.kinds = kindsOf(m.snap.Actors)
			m.applyFilter()
		}
	case detailMsg:
		if msg.name == m.detailName {
			m.detail, m.detailErr = msg.d, msg.err
		}
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m, nil
}

func (m Model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	if k.Type == tea.KeyCtrlC {
		return m, tea.Quit
	}
	if m.typing {
		switch k.Type {
		case tea.KeyEnter, tea.KeyEsc:
			m.typing = false
		case tea.KeyBackspace:
			if r := []rune(m.filter); len(r) > 0 {
				m.filter = string(r[:len(r)-1])
			}
		case tea.KeyRunes, tea.KeySpace:
			m.filter += string(k.Runes)
		}
		m.applyFilter()
		return m, nil
	}
	if m.detailName != "" {
		switch k.String() {
		case "q":
			return m, tea.Quit
		case "esc", "backspace", "left", "h":
			m.detailName, m.detail, m.detailErr, m.detailTop = "", nil, nil, 0
			return m, m.fetch()
		case "down", "j":
			m.detailTop++
		case "up", "k":
			m.detailTop = max(0, m.detailTop-1)
		}
		return m, nil
	}
	switch k.String() {
	case "q":
		return m, tea.Quit
	case "down", "j":
		m.cursor = min(m.cursor+1, len(m.rows)-1)
	case "up", "k":
		m.cursor = max(m.cursor-1, 0)
	case "pgdown":
		m.cursor = min(m.cursor+m.listHeight(), len(m.rows)-1)
	case "pgup":
		m.cursor = max(m.cursor-m.listHeight(), 0)
	case "/":
		m.typing = true
	case "tab":
		m.kindIdx = (m.kindIdx + 1) % (len(m.kinds) + 1)
		m.applyFilter()
	case "enter", "right", "l":
		if m.cursor < len(m.rows) {
			m.detailName = m.rows[m.cursor].Name
			m.detail, m.detailErr, m.detailTop = nil, nil, 0
			return m, m.fetch()
		}
	}
	m.cursor = max(m.cursor, 0)
	return m, nil
}

// applyFilter recomputes the rows shown: the kind chosen with tab, and the
// typed filter as a substring of kind/name.
func (m *Model) applyFilter() {
	kind := ""
	if m.kindIdx > 0 && m.kindIdx <= len(m.kinds) {
		kind = m.kinds[m.kindIdx-1]
	}
	m.rows = m.rows[:0]
	for _, a := range m.snap.Actors {
		if (kind == "" || a.Kind == kind) && (m.filter == "" || strings.Contains(a.Name, m.filter)) {
			m.rows = append(m.rows, a)
		}
	}
	sort.SliceStable(m.rows, func(i, j int) bool {
		if m.rows[i].Kind != m.rows[j].Kind {
			return m.rows[i].Kind < m.rows[j].Kind
		}
		return m.rows[i].Name < m.rows[j].Name
	})
	if m.cursor >= len(m.rows) {
		m.cursor = max(len(m.rows)-1, 0)
	}
}

func kindsOf(actors []admin.Actor) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range actors {
		if !seen[a.Kind] {
			seen[a.Kind] = true
			out = append(out, a.Kind)
		}
	}
	sort.Strings(out)
	return out
}

var (
	titleStyle    = lipgloss.NewStyle().Bold(true)
	kindStyle     = lipgloss.NewStyle().Bold(true).Underline(true)
	selectedStyle = lipgloss.NewStyle().Reverse(true)
	dimStyle      = lipgloss.NewStyle().Faint(true)
	errStyle      = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
)

// listHeight is how many actor rows fit (header 3 lines, footer 2).
func (m Model) listHeight() int { return max(m.height-5, 3) }

// View renders the screen.
func (m Model) View() string {
	if m.detailName != "" {
		return m.viewDetail()
	}
	var b strings.Builder
	kind := "all kinds"
	if m.kindIdx > 0 && m.kindIdx <= len(m.kinds) {
		kind = m.kinds[m.kindIdx-1]
	}
	fmt.Fprintf(&b, "%s  %s  %d/%d actors  [%s]", titleStyle.Render("kaas inspect"), m.addr, len(m.rows), len(m.snap.Actors), kind)
	if m.filter != "" || m.typing {
		cursor := ""
		if m.typing {
			cursor = "█"
		}
		fmt.Fprintf(&b, "  filter: %s%s", m.filter, cursor)
	}
	b.WriteString("\n")
	if m.err != nil {
		b.WriteString(errStyle.Render("error: "+m.err.Error()) + "\n")
	} else {
		b.WriteString("\n")
	}
	header := fmt.Sprintf("  %-36s %8s %10s %9s  %s", "ACTOR", "MAILBOX", "MSGS/S", "LAST MSG", "STATE")
	b.WriteString(dimStyle.Render(truncate(header, m.width)) + "\n")

	// Keep the cursor on screen.
	h := m.listHeight()
	top := m.top
	if m.cursor < top {
		top = m.cursor
	}
	if m.cursor >= top+h {
		top = m.cursor - h + 1
	}
	lines, prevKind := 0, ""
	for i := top; i < len(m.rows) && lines < h; i++ {
		a := m.rows[i]
		if a.Kind != prevKind {
			n := 0
			for _, r := range m.rows {
				if r.Kind == a.Kind {
					n++
				}
			}
			b.WriteString(kindStyle.Render(fmt.Sprintf("%s (%d)", a.Kind, n)) + "\n")
			prevKind = a.Kind
			lines++
		}
		line := fmt.Sprintf("  %-36s %8d %10.1f %9s  %s", a.Name, a.MailboxDepth, a.MessagesPerSec, age(a.LastMessageAgeSec), summaryLine(a.Summary))
		line = truncate(line, m.width)
		if i == m.cursor {
			line = selectedStyle.Render(line)
		}
		b.WriteString(line + "\n")
		lines++
	}
	for ; lines < h; lines++ {
		b.WriteString("\n")
	}
	b.WriteString(dimStyle.Render("↑/↓ move · enter inspect · / filter · tab kind · q quit"))
	return b.String()
}

func (m Model) viewDetail() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s  %s\n\n", titleStyle.Render("kaas inspect"), m.addr, m.detailName)
	var lines []string
	switch {
	case m.detailErr != nil:
		lines = []string{errStyle.Render("error: " + m.detailErr.Error())}
	case m.detail == nil:
		lines = []string{"loading…"}
	default:
		lines = detailLines(m.detail)
	}
	h := max(m.height-4, 3)
	top := min(m.detailTop, max(len(lines)-h, 0))
	for i := top; i < len(lines) && i < top+h; i++ {
		b.WriteString(truncate(lines[i], m.width) + "\n")
	}
	for i := min(len(lines)-top, h); i < h; i++ {
		b.WriteString("\n")
	}
	b.WriteString(dimStyle.Render("esc back · ↑/↓ scroll · q quit"))
	return b.String()
}

func age(sec float64) string {
	switch {
	case sec < 0:
		return "never"
	case sec < 10:
		return fmt.Sprintf("%.1fs", sec)
	case sec < 3600:
		return fmt.Sprintf("%.0fs", sec)
	}
	return fmt.Sprintf("%.1fh", sec/3600)
}

func truncate(s string, width int) string {
	r := []rune(s)
	if width <= 1 || len(r) <= width {
		return s
	}
	return string(r[:width-1]) + "…"
}
