from ssegate_lab.testing.kafka import kafka_broker as kafka_broker
