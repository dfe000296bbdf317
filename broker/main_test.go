package broker_test

import (
	"testing"

	"kaas/broker/brokertest"
)

// TestMain fails the package if a test leaves a broker or client running.
func TestMain(m *testing.M) { brokertest.Main(m) }
