package kafka

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

var _ sarama.SCRAMClient = (*scramClient)(nil)

// scramClient puts github.com/xdg-go/scram (RFC 5802, with SASLprep) behind
// sarama.SCRAMClient, as sarama leaves the algorithm to the application.
// The library's errors never include the password.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func newSCRAM(hash scram.HashGeneratorFcn) *scramClient { return &scramClient{hash: hash} }

func (s *scramClient) Begin(user, password, authzID string) error {
	c, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return fmt.Errorf("scram: %w", err)
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) {
	if s.conv == nil {
		return "", errors.New("scram: step before begin")
	}
	resp, err := s.conv.Step(challenge)
	if err != nil {
		return "", fmt.Errorf("scram: %w", err)
	}
	return resp, nil
}

func (s *scramClient) Done() bool { return s.conv != nil && s.conv.Done() }
