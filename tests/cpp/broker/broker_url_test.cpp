#include "broker/broker_url.h"

#include <gtest/gtest.h>

namespace ax::broker {

TEST(BrokerUrl, HostPortDb) {
  BrokerUrl u;
  ASSERT_TRUE(ParseBrokerUrl("redis://10.0.0.5:6380/2", "", "", &u).ok());
  EXPECT_EQ(u.host, "10.0.0.5");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.db, 2);
  EXPECT_FALSE(u.tls);
  EXPECT_EQ(u.Redacted(), "redis://10.0.0.5:6380/2");
}

TEST(BrokerUrl, DefaultsAndIpv6) {
  BrokerUrl u;
  ASSERT_TRUE(ParseBrokerUrl("redis://broker", "", "", &u).ok());
  EXPECT_EQ(u.port, 6379);
  EXPECT_EQ(u.db, 0);
  ASSERT_TRUE(ParseBrokerUrl("redis://[::1]:7000", "", "", &u).ok());
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 7000);
}

TEST(BrokerUrl, CredentialsAreNeverInTheRedactedForm) {
  BrokerUrl u;
  ASSERT_TRUE(ParseBrokerUrl("rediss://judge:s3cr%40t@h:1/0", "", "", &u).ok());
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.user, "judge");
  EXPECT_EQ(u.password, "s3cr@t");
  EXPECT_EQ(u.Redacted(), "rediss://judge:***@h:1");
  EXPECT_EQ(u.Redacted().find("s3cr"), std::string::npos);
}

TEST(BrokerUrl, PasswordFromTheEnvironmentUnlessTheUrlHasOne) {
  BrokerUrl u;
  ASSERT_TRUE(ParseBrokerUrl("redis://h:1", "", "envpw", &u).ok());
  EXPECT_EQ(u.password, "envpw");
  EXPECT_EQ(u.Redacted(), "redis://:***@h:1");
  ASSERT_TRUE(ParseBrokerUrl("redis://:urlpw@h:1", "", "envpw", &u).ok());
  EXPECT_EQ(u.password, "urlpw");
}

TEST(BrokerUrl, BadUrlsSayWhyWithoutEchoingThem) {
  BrokerUrl u;
  for (const char* bad : {"http://h:1", "redis://:pw@h:notaport", "redis://:pw@h:70000", "redis://:pw@h:1/x",
                          "redis://:pw@"}) {
    Status s = ParseBrokerUrl(bad, "", "", &u);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
    EXPECT_EQ(s.message().find("pw"), std::string::npos) << s.message();
  }
}

}  // namespace ax::broker
