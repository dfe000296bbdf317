package broker_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"kaas/broker/brokertest"
	"kaas/storage/vfs/memfs"
)

// TestTxnOutcomesSurviveSIGKILL is the transaction power-loss loop with a
// real `kaas serve` SIGKILLed at a random moment of a run of TV2
// transactions (franz-go negotiates transaction version 2: an epoch bump
// per EndTxn); some kills land between a Prepare* and its Complete*
// (which is written without an fsync of its own), and the restarted
// broker finishes the markers (it logs which: 1 round in 8 here). On
// restart over the same data directory every acknowledged commit is
// read whole under read_committed, no acknowledged abort is, no
// transaction is half visible, and no producer epoch is handed out twice.
// Both durability modes (killModes): under --flush-interval-ms the
// transaction state and partition writes wait for the page cache only,
// which the kill leaves whole.
func TestTxnOutcomesSurviveSIGKILL(t *testing.T) {
	bin := buildKaas(t)
	for _, m := range killModes {
		for round := 0; round < memfs.Iterations(2); round++ {
			t.Run(fmt.Sprintf("%s/%d", m.name, round), func(t *testing.T) { txnOutcomesSurviveSIGKILL(t, bin, m.flags) })
		}
	}
}

func txnOutcomesSurviveSIGKILL(t *testing.T, bin string, flags []string) {
	dir := t.TempDir()
	p := serveKaas(t, bin, dir, flags...)
	brokertest.CreateTopic(t, p.addr, "ptx", 2, nil)
	run := runTxnsUntil(t, p.addr, 10+rand.IntN(20), p.kill)
	p = serveKaas(t, bin, dir, flags...)
	checkTxnOutcomes(t, p.addr, run, func() string { return "(a real process: no disk image)" })
	p.kill()
	p.mu.Lock()
	resumed := strings.Contains(p.log.String(), "resuming transaction markers")
	p.mu.Unlock()
	t.Logf("the restarted broker found a Prepare* to finish: %v", resumed)
}
