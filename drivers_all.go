package main

// The drivers, steps and reporters a planrun binary offers: each registers
// itself by name when imported.
import (
	_ "github.com/planrun/planrun/collectors"
	_ "github.com/planrun/planrun/drivers/amqp"
	_ "github.com/planrun/planrun/drivers/kafka"
	_ "github.com/planrun/planrun/drivers/memory"
	_ "github.com/planrun/planrun/drivers/mqtt"
	_ "github.com/planrun/planrun/drivers/nats"
	_ "github.com/planrun/planrun/drivers/rabbitmq"
	_ "github.com/planrun/planrun/drivers/redis"
	_ "github.com/planrun/planrun/drivers/rocketmq"
	_ "github.com/planrun/planrun/steps"
)
