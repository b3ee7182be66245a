#!/usr/bin/env python3
"""Walks the official Apache RocketMQ Dashboard (2.1.0) against `petrel serve`: every page's
calls, as its UI makes them (the REST endpoints its React pages call, with the UI's parameters),
must answer with status 0 and the workload's data; each page is then opened in headless Chromium
(Selenium), must show the workload's names, and a screenshot is kept.

    scripts/dashboard-walk.py DASHBOARD_URL BROKER_ADDR SCREENSHOT_DIR TRACED_MSG_ID
    scripts/dashboard-walk.py --acl DASHBOARD_URL SCREENSHOT_DIR

The second form walks the ACL page against a broker with ACL 2.0 on (authentication and
authorization), the dashboard signing as that broker's first user: users and rules listed,
created and deleted.

Expects the workload of `ClientTest metrics` (topic MetricsTopic, push group cg_metrics with one
message in its DLQ, lite pull group cg_metrics_pull, producer group pg_metrics, and a message
traced from pg_trace to cg_trace) to be connected.
Prints `ok:` / `FAIL:` lines; exits 1 on any failure."""
import datetime
import json
import os
import sys
import time
import urllib.parse
import urllib.request

failures = []


def call(method, path, params=None, body=None):
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def check(what, method, path, params=None, body=None, expect=lambda d: True):
    """Calls one endpoint; its answer must have status 0 and `expect(data)` must hold."""
    try:
        answer = call(method, path, params, body)
    except Exception as e:  # noqa: BLE001 - any failure of the call is the check's failure
        failures.append(what)
        print(f"FAIL: {what}: {path}: {e}")
        return None
    data = answer.get("data")
    ok = answer.get("status") == 0
    try:
        ok = ok and expect(data)
    except Exception:  # noqa: BLE001 - an answer of the wrong shape fails the check
        ok = False
    if ok:
        print(f"ok: {what}")
    else:
        failures.append(what)
        print(f"FAIL: {what}: {path} answered {json.dumps(answer)[:600]}")
    return data


_browser = None


def browser():
    """One headless Chromium, driven by Selenium through Debian's chromedriver."""
    global _browser
    if _browser is None:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service

        options = Options()
        for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1440,900"]:
            options.add_argument(arg)
        options.binary_location = "/usr/bin/chromium"
        _browser = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    return _browser


def click_button(d, wait, label):
    from selenium.webdriver.common.by import By

    button = wait.until(lambda d: next((b for b in d.find_elements(By.TAG_NAME, "button") if b.text.strip() == label), None))
    button.click()


def fill_producer_form(d, wait):
    """The producer page's form, as a user fills it: the topic picked in its select, the group
    typed, then SEARCH."""
    from selenium.webdriver.common.by import By

    wait.until(lambda d: "PRODUCER_GROUP" in d.find_element(By.TAG_NAME, "body").text)
    d.find_element(By.CSS_SELECTOR, ".ant-select").click()
    search = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, ".ant-select-selection-search-input"))
    search.send_keys("MetricsTopic")
    option = wait.until(
        lambda d: next((o for o in d.find_elements(By.CSS_SELECTOR, ".ant-select-item-option") if o.text == "MetricsTopic"), None)
    )
    option.click()
    group = next(i for i in d.find_elements(By.CSS_SELECTOR, "input.ant-input") if i.is_displayed())
    group.send_keys("pg_metrics")
    click_button(d, wait, "SEARCH")


def screenshot(page, name, shows=(), click=None, fill=None):
    """Opens `page` as a user does, fills its form (`fill`) or clicks the button labelled
    `click` if given, waits (20 s at most) until the page shows every text of `shows`, and keeps
    a screenshot."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    out = os.path.join(shots, f"dashboard-{name}.png")
    d = browser()
    try:
        d.get(f"{base}/#/{page}")
        wait = WebDriverWait(d, 20)
        if fill:
            fill(d, wait)
        if click:
            click_button(d, wait, click)
        wait.until(lambda d: all(t in d.find_element(By.TAG_NAME, "body").text for t in shows))
        d.save_screenshot(out)
        print(f"ok: the {name} page shows {', '.join(shows) or 'itself'} ({out})")
    except Exception as e:  # noqa: BLE001 - a page that never shows its data fails the walk
        try:
            d.save_screenshot(out)
        except Exception:  # noqa: BLE001 - the browser itself may be gone
            pass
        failures.append(f"page {name}")
        print(f"FAIL: the {name} page did not show {shows}: {type(e).__name__} (its screenshot: {out})")


def acl_walk():
    """The ACL page: users and rules, created, listed and deleted through the dashboard."""
    where = {"clusterName": "DefaultCluster"}
    check("acl: the users", "GET", "/acl/users.query", where,
          expect=lambda d: any(u["username"] == "rocketmq" for u in d))
    check("acl: create a user", "POST", "/acl/createUser.do", body={
        "clusterName": "DefaultCluster",
        "userInfo": {"username": "dashuser", "password": "dash-password", "userType": "Normal", "userStatus": "enable"}})
    check("acl: the new user listed", "GET", "/acl/users.query", where,
          expect=lambda d: any(u["username"] == "dashuser" and u["userType"] == "Normal" for u in d))
    check("acl: create a rule", "POST", "/acl/createAcl.do", body={
        "clusterName": "DefaultCluster", "subject": "User:dashuser",
        "policies": [{"policyType": "Custom", "entries": [
            {"resource": ["Topic:MetricsTopic"], "actions": ["Pub", "Sub"], "sourceIps": ["127.0.0.1"], "decision": "Allow"}]}]})
    check("acl: the rule listed", "GET", "/acl/acls.query", {**where, "searchParam": "dashuser"},
          expect=lambda d: any(r["subject"] == "User:dashuser" and "MetricsTopic" in json.dumps(r) for r in d))
    screenshot("acl", "acl", shows=("rocketmq", "dashuser"), click="Confirm")
    check("acl: delete the rule", "DELETE", "/acl/deleteAcl.do", {**where, "subject": "User:dashuser", "resource": "Topic:MetricsTopic"})
    check("acl: the rule gone", "GET", "/acl/acls.query", {**where, "searchParam": "dashuser"},
          expect=lambda d: not any(r["subject"] == "User:dashuser" for r in d))
    check("acl: delete the user", "DELETE", "/acl/deleteUser.do", {**where, "username": "dashuser"})
    check("acl: the user gone", "GET", "/acl/users.query", where,
          expect=lambda d: not any(u["username"] == "dashuser" for u in d))


def main_walk():
    now_ms = int(time.time() * 1000)
    hour_ago_ms = now_ms - 3_600_000

    # Cluster page: brokers with their runtime figures, and a broker's configuration.
    check("cluster: the broker and its runtime figures", "GET", "/cluster/list.query",
          expect=lambda d: "msgPutTotalTodayNow" in d["brokerServer"]["broker-a"]["0"])
    check("cluster: the broker's configuration", "GET", "/cluster/brokerConfig.query", {"brokerAddr": broker},
          expect=lambda d: d["brokerName"] == "broker-a")

    # Topic page: the list (with system topics), a new topic, its route, stats and consumers, and a
    # test message sent from the page.
    check("topic: the list, system topics marked", "GET", "/topic/list.query",
          {"skipSysProcess": "false", "skipRetryAndDlq": "false"},
          expect=lambda d: "MetricsTopic" in d["topicList"] and "%SYS%TBW102" in d["topicList"])
    check("topic: the list with each topic's type", "GET", "/topic/list.queryTopicType",
          expect=lambda d: "MetricsTopic" in d["topicNameList"])
    check("topic: create a NORMAL topic", "POST", "/topic/createOrUpdate.do", body={
        "clusterNameList": ["DefaultCluster"], "brokerNameList": ["broker-a"], "topicName": "DashboardTopic",
        "writeQueueNums": 4, "readQueueNums": 4, "perm": 6, "order": False, "messageType": "NORMAL"})
    check("topic: the new topic's configuration", "GET", "/topic/examineTopicConfig.query", {"topic": "DashboardTopic"},
          expect=lambda d: d[0]["messageType"] == "NORMAL" and d[0]["writeQueueNums"] == 4)
    check("topic: its route", "GET", "/topic/route.query", {"topic": "DashboardTopic"},
          expect=lambda d: d["queueDatas"][0]["writeQueueNums"] == 4)
    sent = check("topic: send a test message", "POST", "/topic/sendTopicMessage.do", body={
        "topic": "DashboardTopic", "key": "dash-key", "tag": "dash-tag", "messageBody": "from the dashboard",
        "traceEnabled": False}, expect=lambda d: d["sendStatus"] == "SEND_OK")
    check("topic: stats", "GET", "/topic/stats.query", {"topic": "DashboardTopic"},
          expect=lambda d: sum(o["maxOffset"] for o in d["offsetTable"].values()) == 1)
    check("topic: who consumes it", "GET", "/topic/queryTopicConsumerInfo.query", {"topic": "MetricsTopic"},
          expect=lambda d: "cg_metrics" in d["groupList"])
    check("topic: its consumers' progress", "GET", "/topic/queryConsumerByTopic.query", {"topic": "MetricsTopic"},
          expect=lambda d: "cg_metrics" in d)

    # Consumer page: groups with their clients, progress, connection, running info and settings.
    groups = check("consumer: the groups, online", "GET", "/consumer/groupList.query",
                   {"skipSysGroup": "false", "address": ""},
                   expect=lambda d: any(g["group"] == "cg_metrics" and g["count"] == 1 for g in d))
    check("consumer: a group's progress per queue", "GET", "/consumer/queryTopicByConsumer.query",
          {"consumerGroup": "cg_metrics", "address": broker},
          expect=lambda d: any(t["topic"] == "MetricsTopic" for t in d))
    conn = check("consumer: a group's connections", "GET", "/consumer/consumerConnection.query",
                 {"consumerGroup": "cg_metrics", "address": broker},
                 expect=lambda d: len(d["connectionSet"]) == 1)
    if conn:
        client = conn["connectionSet"][0]["clientId"]
        check("consumer: a client's running info", "GET", "/consumer/consumerRunningInfo.query",
              {"consumerGroup": "cg_metrics", "clientId": client, "jstack": "false"},
              expect=lambda d: "MetricsTopic" in json.dumps(d))
    check("consumer: a group's settings", "GET", "/consumer/examineSubscriptionGroupConfig.query",
          {"consumerGroup": "cg_metrics"},
          expect=lambda d: d[0]["subscriptionGroupConfig"]["groupName"] == "cg_metrics")
    check("consumer: create a group", "POST", "/consumer/createOrUpdate.do", body={
        "clusterNameList": ["DefaultCluster"], "brokerNameList": ["broker-a"],
        "subscriptionGroupConfig": {"groupName": "DashboardGroup", "consumeEnable": True, "consumeBroadcastEnable": True,
                                    "consumeMessageOrderly": False, "retryQueueNums": 1, "retryMaxTimes": 16,
                                    "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1}})
    check("consumer: the new group's settings", "GET", "/consumer/examineSubscriptionGroupConfig.query",
          {"consumerGroup": "DashboardGroup"},
          expect=lambda d: d[0]["subscriptionGroupConfig"]["retryMaxTimes"] == 16)

    # Producer page.
    check("producer: a group's connections", "GET", "/producer/producerConnection.query",
          {"topic": "MetricsTopic", "producerGroup": "pg_metrics"},
          expect=lambda d: len(d["connectionSet"]) >= 1)

    # Message page: by topic and time, by key, by id, the detail, and a resend to a consumer.
    page = check("message: by topic and time", "POST", "/message/queryMessagePageByTopic.query", body={
        "topic": "MetricsTopic", "begin": hour_ago_ms, "end": now_ms + 60_000, "pageNum": 1, "pageSize": 20, "taskId": ""},
        expect=lambda d: len(d["page"]["content"]) > 0)
    by_key = check("message: by key", "GET", "/message/queryMessageByTopicAndKey.query",
                   {"topic": "DashboardTopic", "key": "dash-key"},
                   expect=lambda d: len(d) == 1 and d[0]["messageBody"] == "from the dashboard")
    if sent:
        check("message: by id, with its detail", "GET", "/message/viewMessage.query",
              {"msgId": sent["msgId"], "topic": "DashboardTopic"},
              expect=lambda d: d["messageView"]["messageBody"] == "from the dashboard")
    normal = next((m for m in (page or {}).get("page", {}).get("content", []) if m["messageBody"] == "normal-1"), None)
    if normal:
        check("message: resend to a consumer (consume directly)", "POST", "/message/consumeMessageDirectly.do",
              {"topic": "MetricsTopic", "consumerGroup": "cg_metrics", "msgId": normal["msgId"]},
              expect=lambda d: d["consumeResult"] == "CR_SUCCESS")
    else:
        failures.append("message: normal-1 in the page")
        print("FAIL: message: normal-1 was not in the topic's page")

    # DLQ page: the group's dead letters, and a resend.
    dlq = check("dlq: the group's dead letters", "POST", "/dlqMessage/queryDlqMessageByConsumerGroup.query", body={
        "topic": "%DLQ%cg_metrics", "begin": hour_ago_ms, "end": now_ms + 60_000, "pageNum": 1, "pageSize": 20,
        "taskId": ""}, expect=lambda d: any(m["messageBody"] == "dead" for m in d["page"]["content"]))
    if dlq:
        dead = next(m for m in dlq["page"]["content"] if m["messageBody"] == "dead")
        check("dlq: resend a dead letter", "POST", "/dlqMessage/batchResendDlqMessage.do",
              body=[{"topicName": "%DLQ%cg_metrics", "consumerGroup": "cg_metrics", "msgId": dead["msgId"]}],
              expect=lambda d: len(d) == 1)

    # Message trace page: the traced message's graph, its producer and its consumer group.
    check("trace: a message's send and consume hops", "GET", "/messageTrace/viewMessageTraceGraph.query",
          {"msgId": traced, "traceTopic": "RMQ_SYS_TRACE_TOPIC"},
          expect=lambda d: d["producerNode"]["groupName"] == "pg_trace"
          and any(n["subscriptionGroup"] == "cg_trace" for n in d["subscriptionNodeList"]))

    # Dashboard home and operations.
    check("dashboard: broker history", "GET", "/dashboard/broker.query", {"date": datetime.date.today().isoformat()},
          expect=lambda d: isinstance(d, dict))
    check("ops: the name servers", "GET", "/ops/homePage.query", expect=lambda d: len(d["namesvrAddrList"]) == 1)

    pages = [
        ("", "home", ("broker-a",)),
        ("cluster", "cluster", ("broker-a", broker)),
        ("topic", "topic", ("DashboardTopic",)),
        ("consumer", "consumer", ("cg_metrics", "cg_metrics_pull", "CONSUME_PASSIVELY")),
        ("message", "message", ("Topic", "Search")),
        ("dlqMessage", "dlq", ("Consumer", "batchReSend", "Search")),
        ("messageTrace", "trace", ("TraceTopic", "Search")),
        ("ops", "ops", ("127.0.0.1:",)),
    ]
    for page, name, shows in pages:
        screenshot(page, name, shows)
    # A form driven: the producer page finds the workload's producer, a Java 5.5.0 client.
    screenshot("producer", "producer", ("JAVA", "V5_5_0"), fill=fill_producer_form)



try:
    if sys.argv[1] == "--acl":
        base, shots = sys.argv[2], sys.argv[3]
        acl_walk()
    else:
        base, broker, shots, traced = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
        main_walk()
finally:
    if _browser is not None:
        _browser.quit()
print(f"{'FAIL' if failures else 'ok'}: the dashboard walk: {len(failures)} failures")
sys.exit(1 if failures else 0)
