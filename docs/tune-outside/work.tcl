# A small Tcl workload: dicts, lists, string building, lsort, string map, regsub.
set d [dict create]
for {set i 0} {$i < 100000} {incr i} {
    dict set d key$i [string repeat x [expr {$i % 37}]]
}
set keys [lsort [dict keys $d]]
set total 0
foreach k $keys { incr total [string length [dict get $d $k]] }
set l {}
for {set i 0} {$i < 60000} {incr i} { lappend l [expr {($i * 7919) % 100003}] }
set l [lsort -integer $l]
set s ""
for {set i 0} {$i < 20000} {incr i} { append s "item $i, " }
set s2 [string map {item thing , ;} $s]
regsub -all {thing ([0-9]+)} $s2 {<\1>} s3
set d2 [dict create]
foreach w [split $s3 ";"] { dict incr d2 [string length $w] }
unset d
puts "$total [llength $l] [string length $s3] [dict size $d2]"
