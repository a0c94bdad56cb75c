<?xml version="1.0" encoding="UTF-8"?>
<tileset version="1.10" tiledversion="1.10.2" name="willowbrook" tilewidth="32" tileheight="32" tilecount="58" columns="8">
 <image source="../tiles/willowbrook.png" width="256" height="256"/>
 <tile id="0" type="grass">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="1" type="grass_tufts">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="2" type="grass_flowers">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="3" type="dirt">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="4" type="cobble">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="5" type="water">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="6" type="bridge_left">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="7" type="bridge_right">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="8" type="wood_floor">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="9" type="tile_floor">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="10" type="carpet">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="11" type="stone_floor">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="12" type="wall">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="13" type="wall_window">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="14" type="door_h">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="15" type="door_v">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="16" type="bed_top">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="17" type="bed_bottom">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="18" type="desk">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="19" type="chair">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="20" type="closet">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="21" type="stove">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="22" type="refrigerator">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="23" type="kitchen_counter">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="24" type="table">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="25" type="round_table">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="26" type="shower">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="27" type="sink">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="28" type="toilet">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="29" type="counter">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="30" type="coffee_machine">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="31" type="bookshelf">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="32" type="shelf">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="33" type="cash_register">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="34" type="produce_stand">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="35" type="bench">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="36" type="fountain_nw">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="37" type="fountain_ne">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="38" type="fountain_sw">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="39" type="fountain_se">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="40" type="garden">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="41" type="piano">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="42" type="dartboard">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="43" type="lectern">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="44" type="blackboard">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="45" type="computer">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="46" type="student_desk">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="47" type="tree">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="48" type="bush">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="49" type="lamp_post">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="50" type="flower_pot">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="51" type="rock">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="52" type="barrel">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="53" type="mailbox">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="54" type="rug">
  <properties>
   <property name="blocks" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="55" type="counter_sink">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="56" type="bottle_shelf">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="57" type="collision">
  <properties>
   <property name="blocks" type="bool" value="true"/>
  </properties>
 </tile>
</tileset>
