from ssegate.kafka.testing import kafka_broker as kafka_broker
